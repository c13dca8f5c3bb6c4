// Package mountexec connects exec backends to an agentfs mount: the sync
// barrier (the mount's control Sync) and a change tracker that reads the
// volume's history instead of walking the tree. It sits above exec/ and
// fs/control (exec itself never imports the layers that serve a mount),
// and is used by the agentfs command and by tests that run the exec suite
// over a mount.
package mountexec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/snapshot"
)

// Seams returns the sync barrier and change tracker of the agentfs mount
// that holds dir, with the tracker rooted at dir; (nil, nil, nil) when dir
// is on any other filesystem; an error when dir is on an agentfs mount
// whose server does not answer.
func Seams(ctx context.Context, dir string) (exec.Syncer, exec.ChangeTracker, error) {
	c, err := control.Find(ctx, dir)
	if errors.Is(err, control.ErrNotMount) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	rel, err := filepath.Rel(c.MountPoint(), abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, nil, fmt.Errorf("%s is not below the mount point %s", dir, c.MountPoint())
	}
	if rel == "." {
		rel = ""
	}
	return Syncer{Client: c}, &CheckpointTracker{Client: c, Root: filepath.ToSlash(rel)}, nil
}

// Syncer is the sync barrier of a mount: Sync returns once everything
// written to it before the call is in blob storage and committed.
type Syncer struct{ Client *control.Client }

// Sync implements exec.Syncer.
func (s Syncer) Sync(ctx context.Context) error { return s.Client.Sync(ctx) }

// CheckpointTracker is an exec.ChangeTracker for an agentfs mount. Begin
// checkpoints the mount and remembers the commit that covers everything
// written so far; Changes checkpoints again and asks the mount's server
// for the difference between the two commits within the tracked
// directory. Equal subtrees are skipped by hash, so the cost follows the
// size of the change (of the whole volume, between the two commits), not
// of the tree; it costs up to two commits per command when something was
// written. It is safe for concurrent use; commands that overlap see each
// other's changes, as the contract allows.
//
// Directories are reported when created or deleted, and as modified only
// when their own attributes (mode, owner, xattrs) changed; times are not
// compared, so a rewrite with identical content is no change.
type CheckpointTracker struct {
	Client *control.Client
	// Root is the tracker's root, relative to the mount point (slash
	// separated, "" for the mount point itself).
	Root string
}

type mark struct {
	dir    string // relative to the mount point
	commit snapshot.CommitID
}

// Begin implements exec.ChangeTracker.
func (t *CheckpointTracker) Begin(ctx context.Context, dir string) (exec.Mark, error) {
	id, err := t.Client.Checkpoint(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("change tracking: checkpoint before the command: %w", err)
	}
	return &mark{dir: joinRel(t.Root, dir), commit: id}, nil
}

// Changes implements exec.ChangeTracker.
func (t *CheckpointTracker) Changes(ctx context.Context, m exec.Mark) (*exec.Changes, error) {
	mk, ok := m.(*mark)
	if !ok {
		return nil, fmt.Errorf("checkpoint tracker: mark %T is not from this tracker: %w", m, exec.ErrInvalid)
	}
	id, err := t.Client.Checkpoint(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("change tracking: checkpoint after the command: %w", err)
	}
	out := &exec.Changes{Created: []string{}, Modified: []string{}, Deleted: []string{}}
	if id == mk.commit {
		return out, nil
	}
	prefix := ""
	if mk.dir != "" {
		prefix = mk.dir + "/"
	}
	_, err = t.Client.Diff(ctx, control.DiffRequest{A: mk.commit.String(), B: id.String(), Dir: mk.dir}, func(c histdiff.Change) error {
		if c.Path == "." || !strings.HasPrefix(c.Path, prefix) && prefix != "" {
			return nil
		}
		p := strings.TrimPrefix(c.Path, prefix)
		switch c.Letter() {
		case 'A':
			out.Created = append(out.Created, p)
		case 'D':
			out.Deleted = append(out.Deleted, p)
		default:
			// A directory whose entries changed is not itself modified; a
			// path that changed between a directory and a file is.
			if c.IsDir() && c.Flags()&^snapshot.ChangedContent == 0 {
				return nil
			}
			out.Modified = append(out.Modified, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("change tracking: %w", err)
	}
	slices.Sort(out.Created)
	slices.Sort(out.Modified)
	slices.Sort(out.Deleted)
	return out, nil
}

func joinRel(root, dir string) string {
	dir = strings.Trim(dir, "/")
	switch {
	case root == "":
		return dir
	case dir == "":
		return root
	}
	return root + "/" + dir
}
