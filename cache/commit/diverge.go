package commit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentfs/agentfs/snapshot"
)

// Diverge saves commit c, which lost its number to another writer
// (WriteCommit said snapshot.ErrCommitExists), as the first commit of a
// new branch, and returns that commit: of kind "diverged", on a branch
// named after orig (the branch the volume was mounted on) and the time,
// "ORIG-conflict-YYYYMMDD-HHMMSS", with "-i" added while the name is taken
// (20 tries) and cut to its last 100 characters. Nothing of c is dropped:
// the new branch reuses the trees and chunks of c's parent, and if gc
// pruned that commit meanwhile (some of them may be gone), log says so.
// The caller moves the volume (its state, its lease) to the new branch.
func Diverge(ctx context.Context, repo *snapshot.Repo, c snapshot.Commit, orig string, now func() time.Time, log *slog.Logger) (snapshot.Commit, error) {
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-conflict-%s", orig, now().UTC().Format("20060102-150405"))
		if i > 0 {
			name = fmt.Sprintf("%s-%d", name, i)
		}
		if len(name) > 100 {
			name = name[len(name)-100:]
		}
		nc := c
		nc.ID = snapshot.CommitID{Branch: name, Seq: 1}
		nc.Kind = "diverged"
		nc.Message = fmt.Sprintf("changes of %s that lost a commit race on %s", c.Writer, c.ID.Branch)
		err := repo.WriteCommit(ctx, nc)
		if errors.Is(err, snapshot.ErrCommitExists) && i < 20 {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("save diverged changes: %w", err)
		}
		log.Warn("another writer committed to this branch; this volume's changes continue on a new branch",
			"branch", c.ID.Branch, "new_branch", name)
		if c.Parent != nil {
			if _, err := repo.ReadCommit(ctx, *c.Parent); errors.Is(err, snapshot.ErrMissing) {
				log.Error("the base of the diverged changes was pruned by gc meanwhile; check the new branch with agentfs fsck",
					"base", c.Parent.String(), "new_branch", name)
			}
		}
		return nc, nil
	}
}
