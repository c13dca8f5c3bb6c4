package cache

import (
	"context"
	"fmt"

	"github.com/agentfs/agentfs/snapshot"
)

// Commit commits everything written before the call, as Sync does, and
// returns the commit that covers it: a new one of the given kind and
// message, or the current head when nothing was pending. On a read-only
// volume it returns the commit the volume shows.
func (v *Volume) Commit(ctx context.Context, kind, message string) (snapshot.CommitID, error) {
	if !v.opts.ReadOnly {
		if err := v.syncWith(ctx, kind, message); err != nil {
			return snapshot.CommitID{}, err
		}
	}
	st := v.getState()
	return snapshot.CommitID{Branch: st.Branch, Seq: st.Seq}, nil
}

// SaveSnapshot commits everything written before the call and names the
// commit that covers it: a consistent point of the workspace, whatever is
// written afterwards.
func (v *Volume) SaveSnapshot(ctx context.Context, name, message string) (snapshot.Snapshot, error) {
	if err := snapshot.ValidateName("snapshot", name); err != nil {
		return snapshot.Snapshot{}, err
	}
	id, err := v.Commit(ctx, "snapshot", message)
	if err != nil {
		return snapshot.Snapshot{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	return v.repo.SaveSnapshot(ctx, name, id, snapshot.SaveOptions{Message: message, Host: v.opts.Host, Now: v.now})
}

// Restore makes the live workspace the tree of ref (a snapshot name, or
// branch[@seq]; see snapshot.Repo.Resolve). Everything written before the
// call is committed first and kept as an automatic snapshot, so a restore
// never loses anything; the restored state becomes the branch's new head.
// Open files keep working, and the kernel is told what changed.
func (v *Volume) Restore(ctx context.Context, ref, message string) (snapshot.RestoreResult, error) {
	if v.opts.ReadOnly {
		return snapshot.RestoreResult{}, ErrReadOnly
	}
	// One critical section: no checkpoint may slip in between the restore
	// commit and the switch (it would take the same commit number).
	v.cpMu.Lock()
	defer v.cpMu.Unlock()
	if err := v.checkpointLocked(ctx, "sync", "before restore of "+ref); err != nil {
		return snapshot.RestoreResult{}, fmt.Errorf("restore %s: commit the current state first: %w", ref, err)
	}
	st := v.getState()
	res, err := v.repo.Restore(ctx, ref, st.Branch, snapshot.RestoreOptions{
		Writer: st.Writer, Message: message, Host: v.opts.Host, Now: v.now})
	if err != nil {
		return res, err
	}
	if err := v.switchToLocked(ctx, res.Commit); err != nil {
		return res, fmt.Errorf("restore %s: the branch was restored but this mount could not follow (remount it): %w", ref, err)
	}
	return res, nil
}

// Rewrite moves the volume's branch to a commit built from its head, and the
// live namespace with it: everything written before the call is committed
// first; fn receives that head and returns the next commit's content (Root,
// Links, Virtual, Message — the engine fills in its number, parent, time,
// kind and writer); the commit is written and the namespace switched to it
// (see SwitchTo). Virtual workspaces use it to discard changes and to move
// their base.
func (v *Volume) Rewrite(ctx context.Context, kind string, fn func(head snapshot.Commit) (snapshot.Commit, error)) (snapshot.Commit, error) {
	if v.opts.ReadOnly {
		return snapshot.Commit{}, ErrReadOnly
	}
	v.cpMu.Lock()
	defer v.cpMu.Unlock()
	if err := v.checkpointLocked(ctx, "sync", "before "+kind); err != nil {
		return snapshot.Commit{}, fmt.Errorf("%s: commit the current state first: %w", kind, err)
	}
	st := v.getState()
	head, err := v.repo.ReadCommit(ctx, snapshot.CommitID{Branch: st.Branch, Seq: st.Seq})
	if err != nil {
		return snapshot.Commit{}, fmt.Errorf("%s: %w", kind, err)
	}
	next, err := fn(head)
	if err != nil {
		return snapshot.Commit{}, err
	}
	next.ID = snapshot.CommitID{Branch: st.Branch, Seq: st.Seq + 1}
	next.Parent = &head.ID
	next.Time = v.now().UTC()
	next.Kind = kind
	next.Host = v.opts.Host
	next.Writer = st.Writer
	if err := v.repo.WriteCommit(ctx, next); err != nil {
		return snapshot.Commit{}, fmt.Errorf("%s: %w", kind, err)
	}
	if err := v.switchToLocked(ctx, next); err != nil {
		return next, fmt.Errorf("%s: committed %v but this mount could not follow (remount it): %w", kind, next.ID, err)
	}
	return next, nil
}

// Head returns the commit the volume derives from (its last commit, or the
// one it was opened at), with the virtual base it records.
func (v *Volume) Head(ctx context.Context) (snapshot.Commit, error) {
	st := v.getState()
	return v.repo.ReadCommit(ctx, snapshot.CommitID{Branch: st.Branch, Seq: st.Seq})
}

// Repo returns the volume's repository (for the layers above: diffs,
// snapshots).
func (v *Volume) Repo() *snapshot.Repo { return v.repo }
