package exec

import "context"

// Syncer is the sync barrier a Backend calls after every command (Exec and
// background jobs) has exited and its whole process tree is gone, before the
// Result is returned. When Sync returns nil, everything the command wrote in
// the workspace must be durable (on an agentfs mount: in blob storage and
// reachable from a commit). A plain directory needs no Syncer (Options.Syncer
// nil).
//
// Sync is called from the goroutine that runs Exec or Job.Wait's
// bookkeeping, possibly from several goroutines at once; implementations
// must be safe for concurrent use. The ctx is detached from the caller's
// cancellation (a cancelled command is still synced) but bounded by
// Options.SyncTimeout. A non-nil error is reported to the caller wrapped
// with ErrSync, alongside the Result.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Mark is an opaque position returned by ChangeTracker.Begin and given back
// to the same tracker's Changes. Only the tracker that made it may interpret
// it.
type Mark any

// ChangeTracker computes the list of paths a command created, modified and
// deleted. A Backend calls Begin just before it starts a command and Changes
// once the command's process tree is gone and the Syncer (if any) has
// returned, from the same goroutine as Exec (or the job's bookkeeping
// goroutine). Calls for different commands may overlap, so a tracker must be
// safe for concurrent use; overlapping commands see each other's changes.
//
// dir is the directory to watch, relative to the tracker's root, slash
// separated, "" for the root itself; a scoped Backend passes its scope.
// Changes returns paths relative to dir. Changes made outside dir are not
// reported.
//
// The default, for plain directories, is WalkTracker. An agentfs mount
// plugs in internal/mountexec's CheckpointTracker, which checkpoints the
// mount in Begin and in Changes and diffs the two commits instead of
// walking the tree.
type ChangeTracker interface {
	Begin(ctx context.Context, dir string) (Mark, error)
	Changes(ctx context.Context, m Mark) (*Changes, error)
}

// Changes lists what a command did to the workspace. Paths are relative to
// the tracked directory, slash separated, and each list is sorted. A path
// appears in at most one list; a path whose type changed (a file replaced by
// a directory) is listed as modified.
type Changes struct {
	Created  []string `json:"created"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}

// Empty reports whether nothing changed.
func (c *Changes) Empty() bool {
	return c == nil || len(c.Created)+len(c.Modified)+len(c.Deleted) == 0
}

// NoChanges is a ChangeTracker that tracks nothing: Results carry a nil
// Changes. Use it to skip the cost of WalkTracker on large plain directories.
type NoChanges struct{}

// Begin returns a nil Mark.
func (NoChanges) Begin(context.Context, string) (Mark, error) { return nil, nil }

// Changes returns nil, nil.
func (NoChanges) Changes(context.Context, Mark) (*Changes, error) { return nil, nil }
