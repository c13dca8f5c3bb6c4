package control

// History requests: checkpoints, snapshots, restores, diffs, forks,
// branches, gc and fsck, answered by the mount's server with its own open
// volume — so that a MOUNTPOINT works wherever a store URL does, with the
// mount's credentials (which the client may not have: they may come from
// the server's environment, or from a URL whose secret parts Info.URL
// leaves out), and so that "live" means the mount's state as of the
// request.
//
// Long requests (diff, gc, fsck) are StreamCalls: their progress or
// changes come as events before the result.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/snapshot"
)

// History is what a mount offers for its volume's history. A Backend that
// also implements History serves the history calls (CheckpointCall and
// the others); for any other the server answers them with ErrNoHistory. Methods are called from the
// server's request goroutines, possibly concurrently.
type History interface {
	// Checkpoint commits everything written to the mount before the call
	// and returns the commit that covers it (cache.Volume.Commit): a new
	// commit of kind "checkpoint" with message, or the head when nothing
	// was pending. On a read-only mount it returns the commit shown.
	Checkpoint(ctx context.Context, message string) (snapshot.CommitID, error)
	// SaveSnapshot checkpoints and names the commit that covers everything
	// written before the call (cache.Volume.SaveSnapshot).
	SaveSnapshot(ctx context.Context, name, message string) (snapshot.Snapshot, error)
	// Restore makes the live mount the tree of ref, keeping the state
	// before as an automatic snapshot (cache.Volume.Restore).
	Restore(ctx context.Context, ref, message string) (snapshot.RestoreResult, error)
	// Repo is the mount's open volume, for the requests that only read or
	// name history (list, diff, fork, branches, gc, fsck).
	Repo() *snapshot.Repo
}

// ErrNoHistory: the mount's server does not serve history requests.
var ErrNoHistory = errors.New("this mount does not serve history requests")

// Live is the reference that names a mount's current state in a diff: the
// server checkpoints and uses the commit that covers everything written
// before the request.
const Live = "live"

// RefCounts are the numbers of branches and snapshots of a mount's volume
// (snapshot.Repo.RefCounts), part of its Status.
type RefCounts struct {
	Branches  int `json:"branches"`
	Snapshots int `json:"snapshots"`
}

// DiffRequest asks for the differences from A to B. Each is "live" (see
// Live) or any reference snapshot.Repo.Resolve accepts: a snapshot, a
// branch (its head), BRANCH@SEQ.
type DiffRequest struct {
	A string `json:"a"`
	B string `json:"b"`
	// Dir restricts the changes to a directory (relative to the root);
	// paths in the answer stay relative to the root.
	Dir string `json:"dir,omitempty"`
	// Patch asks for unified content diffs of text files, each side read
	// up to MaxBytes (default 4 MiB).
	Patch    bool  `json:"patch,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// DiffResult names the two commits a diff compared: their IDs, and how the
// references resolved, for messages ("snapshot base (of main@3)",
// "live (main@9)").
type DiffResult struct {
	A     snapshot.CommitID `json:"a"`
	B     snapshot.CommitID `json:"b"`
	AName string            `json:"a_name"`
	BName string            `json:"b_name"`
}

// GCRequest are the options of a gc run by the mount (snapshot.GCOptions).
type GCRequest struct {
	// Policy says which commits to keep; nil applies the volume's own
	// (snapshot.Repo.Retention).
	Policy *snapshot.Retention `json:"policy,omitempty"`
	DryRun bool                `json:"dry_run,omitempty"`
	// Grace overrides the grace period (tests only; see snapshot.GCOptions).
	Grace time.Duration `json:"grace_ns,omitempty"`
}

// history returns the backend's History, or ErrNoHistory.
func (s *Server) history() (History, error) {
	h, ok := s.b.(History)
	if !ok {
		return nil, ErrNoHistory
	}
	return h, nil
}

// refCounts returns the volume's branch and snapshot counts, or nil when
// the backend serves no history or the listing fails.
func (s *Server) refCounts(ctx context.Context) *RefCounts {
	h, ok := s.b.(History)
	if !ok {
		return nil
	}
	b, n, err := h.Repo().RefCounts(ctx)
	if err != nil {
		s.log.Debug("counting branches and snapshots failed", "err", err)
		return nil
	}
	return &RefCounts{Branches: b, Snapshots: n}
}

// MessageRequest names a snapshot or a reference, with a commit message.
type MessageRequest struct {
	Name    string `json:"name,omitempty"`
	Ref     string `json:"ref,omitempty"`
	Message string `json:"message,omitempty"`
}

// ListSnapshotsRequest asks for the volume's snapshots, with the bytes
// unique to each when Unique is set.
type ListSnapshotsRequest struct {
	Unique bool `json:"unique,omitempty"`
}

// DeleteRequest names a snapshot or branch to remove; Force removes a
// branch that has commits no other branch or snapshot keeps.
type DeleteRequest struct {
	Name  string `json:"name"`
	Force bool   `json:"force,omitempty"`
}

// ForkRequest creates branch Branch from Src.
type ForkRequest struct {
	Src     string `json:"src"`
	Branch  string `json:"branch"`
	Message string `json:"message,omitempty"`
}

// FsckRequest asks for a check of the volume; Full reads every pack.
type FsckRequest struct {
	Full bool `json:"full,omitempty"`
}

// SnapshotInfo carries snapshot.SnapshotInfo (whose UniqueBytes has no
// JSON name of its own).
type SnapshotInfo struct {
	snapshot.Snapshot
	UniqueBytes int64 `json:"unique_bytes"`
}

// The history calls, answered by a Backend that implements History (any
// other answers ErrNoHistory).
var (
	// CheckpointCall commits everything written before and answers the
	// covering commit (History.Checkpoint).
	CheckpointCall = newCall("history/checkpoint", func(ctx context.Context, s *Server, req MessageRequest) (snapshot.CommitID, error) {
		h, err := s.history()
		if err != nil {
			return snapshot.CommitID{}, err
		}
		return h.Checkpoint(ctx, req.Message)
	})
	// SaveSnapshotCall saves the live state as snapshot req.Name.
	SaveSnapshotCall = newCall("history/snapshot/save", func(ctx context.Context, s *Server, req MessageRequest) (snapshot.Snapshot, error) {
		h, err := s.history()
		if err != nil {
			return snapshot.Snapshot{}, err
		}
		return h.SaveSnapshot(ctx, req.Name, req.Message)
	})
	// ListSnapshotsCall lists the volume's snapshots, streaming the
	// progress of counting their unique bytes.
	ListSnapshotsCall = newStreamCall("history/snapshot/list", func(ctx context.Context, s *Server, req ListSnapshotsRequest, ev *Events[snapshot.Progress]) ([]SnapshotInfo, error) {
		h, err := s.history()
		if err != nil {
			return nil, err
		}
		list, err := h.Repo().ListSnapshots(ctx, snapshot.ListOptions{Unique: req.Unique, Progress: throttled(ev.Send)})
		if err != nil {
			return nil, err
		}
		out := make([]SnapshotInfo, len(list))
		for i, si := range list {
			out[i] = SnapshotInfo{Snapshot: si.Snapshot, UniqueBytes: si.UniqueBytes}
		}
		return out, nil
	})
	// DeleteSnapshotCall removes snapshot req.Name.
	DeleteSnapshotCall = newCall("history/snapshot/rm", func(ctx context.Context, s *Server, req DeleteRequest) (struct{}, error) {
		h, err := s.history()
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, h.Repo().DeleteSnapshot(ctx, req.Name)
	})
	// RestoreCall makes the live mount the tree of req.Ref.
	RestoreCall = newCall("history/restore", func(ctx context.Context, s *Server, req MessageRequest) (snapshot.RestoreResult, error) {
		h, err := s.history()
		if err != nil {
			return snapshot.RestoreResult{}, err
		}
		return h.Restore(ctx, req.Ref, req.Message)
	})
	// ForkCall creates a branch (snapshot.Repo.Fork) and answers its first
	// commit.
	ForkCall = newCall("history/fork", func(ctx context.Context, s *Server, req ForkRequest) (snapshot.Commit, error) {
		h, err := s.history()
		if err != nil {
			return snapshot.Commit{}, err
		}
		return h.Repo().Fork(ctx, req.Src, req.Branch, snapshot.ForkOptions{Message: req.Message})
	})
	// BranchesCall lists the volume's branches.
	BranchesCall = newCall("history/branch/list", func(ctx context.Context, s *Server, _ struct{}) ([]snapshot.BranchInfo, error) {
		h, err := s.history()
		if err != nil {
			return nil, err
		}
		return h.Repo().Branches(ctx, time.Now())
	})
	// DeleteBranchCall removes a branch and answers the number of commits
	// removed.
	DeleteBranchCall = newCall("history/branch/rm", func(ctx context.Context, s *Server, req DeleteRequest) (int, error) {
		h, err := s.history()
		if err != nil {
			return 0, err
		}
		return h.Repo().DeleteBranch(ctx, req.Name, snapshot.DeleteBranchOptions{Force: req.Force})
	})
	// DiffCall streams the differences from req.A to req.B, computed by the
	// server ("live" checkpoints the mount first).
	DiffCall = newStreamCall("history/diff", func(ctx context.Context, s *Server, req DiffRequest, ev *Events[histdiff.Change]) (DiffResult, error) {
		h, err := s.history()
		if err != nil {
			return DiffResult{}, err
		}
		a, err := resolveLive(ctx, h, req.A)
		if err != nil {
			return DiffResult{}, err
		}
		b, err := resolveLive(ctx, h, req.B)
		if err != nil {
			return DiffResult{}, err
		}
		err = histdiff.Diff(ctx, h.Repo(), a.Tree, b.Tree, histdiff.Options{Dir: req.Dir, Patch: req.Patch, MaxBytes: req.MaxBytes}, ev.Send)
		return DiffResult{A: a.Commit, B: b.Commit, AName: sourceName(req.A, a), BName: sourceName(req.B, b)}, err
	})
	// GCCall runs gc on the volume, streaming its progress.
	GCCall = newStreamCall("history/gc", func(ctx context.Context, s *Server, req GCRequest, ev *Events[snapshot.Progress]) (snapshot.GCReport, error) {
		h, err := s.history()
		if err != nil {
			return snapshot.GCReport{}, err
		}
		opts := req.Options()
		opts.Progress = throttled(ev.Send)
		return h.Repo().GC(ctx, opts)
	})
	// FsckCall checks the volume, streaming its progress.
	FsckCall = newStreamCall("history/fsck", func(ctx context.Context, s *Server, req FsckRequest, ev *Events[snapshot.Progress]) (FsckReply, error) {
		h, err := s.history()
		if err != nil {
			return FsckReply{}, err
		}
		rep, err := h.Repo().Fsck(ctx, snapshot.FsckOptions{Full: req.Full, Progress: throttled(ev.Send)})
		out := FsckReply{Report: rep, Codes: make([]string, len(rep.Problems))}
		for i, p := range rep.Problems {
			out.Codes[i] = replyOf(p.Err).Code
		}
		return out, err
	})
)

// FsckReply is a snapshot.FsckReport as the server answers it: each
// problem's error travels as its message (Problem.Message) and its Errors
// code (Codes, in the same order), so that the client rebuilds a
// Problem.Err that matches the same sentinel (snapshot.ErrMissing,
// snapshot.ErrCorrupt) as a local fsck's.
type FsckReply struct {
	Report snapshot.FsckReport `json:"report"`
	Codes  []string            `json:"problem_codes,omitempty"`
}

// throttled returns a progress callback that sends at most one event
// every 100 ms.
func throttled(send func(snapshot.Progress) error) func(snapshot.Progress) {
	var last time.Time
	return func(p snapshot.Progress) {
		if time.Since(last) < 100*time.Millisecond {
			return
		}
		last = time.Now()
		_ = send(p)
	}
}

// resolveLive resolves a diff side: "live" checkpoints the mount.
func resolveLive(ctx context.Context, h History, ref string) (snapshot.Source, error) {
	if ref == Live {
		id, err := h.Checkpoint(ctx, "")
		if err != nil {
			return snapshot.Source{}, fmt.Errorf("live: %w", err)
		}
		c, err := h.Repo().ReadCommit(ctx, id)
		if err != nil {
			return snapshot.Source{}, fmt.Errorf("live (%v): %w", id, err)
		}
		return snapshot.Source{Commit: id, Tree: snapshot.CommitTree(c), Time: c.Time}, nil
	}
	return h.Repo().Resolve(ctx, ref)
}

func sourceName(ref string, s snapshot.Source) string {
	if ref == Live {
		return fmt.Sprintf("live (%v)", s.Commit)
	}
	return s.String()
}

// Checkpoint commits everything written to the mount before the call and
// returns the commit that covers it (see History.Checkpoint).
func (c *Client) Checkpoint(ctx context.Context, message string) (snapshot.CommitID, error) {
	return Do(ctx, c, CheckpointCall, MessageRequest{Message: message})
}

// SaveSnapshot saves the mount's state as of the call as snapshot name: a
// consistent point of everything written before.
func (c *Client) SaveSnapshot(ctx context.Context, name, message string) (snapshot.Snapshot, error) {
	return Do(ctx, c, SaveSnapshotCall, MessageRequest{Name: name, Message: message})
}

// Restore makes the live mount the tree of ref; the state before is kept
// as the automatic snapshot the result names (RestoreResult.Saved).
func (c *Client) Restore(ctx context.Context, ref, message string) (snapshot.RestoreResult, error) {
	return Do(ctx, c, RestoreCall, MessageRequest{Ref: ref, Message: message})
}

// ListSnapshots lists the volume's snapshots (snapshot.Repo.ListSnapshots),
// with the bytes unique to each when unique is set (-1 otherwise).
func (c *Client) ListSnapshots(ctx context.Context, unique bool) ([]snapshot.SnapshotInfo, error) {
	return c.ListSnapshotsProgress(ctx, unique, nil)
}

// ListSnapshotsProgress is ListSnapshots calling progress, if not nil,
// with the server's progress from this goroutine.
func (c *Client) ListSnapshotsProgress(ctx context.Context, unique bool, progress func(snapshot.Progress)) ([]snapshot.SnapshotInfo, error) {
	list, err := DoStream(ctx, c, ListSnapshotsCall, ListSnapshotsRequest{Unique: unique}, progressOnly(progress))
	if err != nil {
		return nil, err
	}
	out := make([]snapshot.SnapshotInfo, len(list))
	for i, s := range list {
		out[i] = snapshot.SnapshotInfo{Snapshot: s.Snapshot, UniqueBytes: s.UniqueBytes}
	}
	return out, nil
}

// DeleteSnapshot removes snapshot name.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) error {
	_, err := Do(ctx, c, DeleteSnapshotCall, DeleteRequest{Name: name})
	return err
}

// Fork creates branch newBranch from src (snapshot.Repo.Fork) and returns
// its first commit.
func (c *Client) Fork(ctx context.Context, src, newBranch, message string) (snapshot.Commit, error) {
	return Do(ctx, c, ForkCall, ForkRequest{Src: src, Branch: newBranch, Message: message})
}

// Branches lists the volume's branches (snapshot.Repo.Branches).
func (c *Client) Branches(ctx context.Context) ([]snapshot.BranchInfo, error) {
	return Do(ctx, c, BranchesCall, struct{}{})
}

// DeleteBranch removes branch name (snapshot.Repo.DeleteBranch) and
// returns the number of commits removed.
func (c *Client) DeleteBranch(ctx context.Context, name string, force bool) (int, error) {
	return Do(ctx, c, DeleteBranchCall, DeleteRequest{Name: name, Force: force})
}

// Diff calls fn for every difference from req.A to req.B, computed by the
// server, in path order, and returns the commits compared. An error from
// fn stops the diff and is returned.
func (c *Client) Diff(ctx context.Context, req DiffRequest, fn func(histdiff.Change) error) (DiffResult, error) {
	return DoStream(ctx, c, DiffCall, req, fn)
}

// GC runs gc on the mount's volume (snapshot.Repo.GC); progress, if not
// nil, is called with the server's progress from this goroutine.
func (c *Client) GC(ctx context.Context, req GCRequest, progress func(snapshot.Progress)) (snapshot.GCReport, error) {
	return DoStream(ctx, c, GCCall, req, progressOnly(progress))
}

// Fsck checks the mount's volume (snapshot.Repo.Fsck); progress as for GC.
// Each problem's Err has its message and matches the sentinel the
// server's matched.
func (c *Client) Fsck(ctx context.Context, full bool, progress func(snapshot.Progress)) (snapshot.FsckReport, error) {
	rep, err := DoStream(ctx, c, FsckCall, FsckRequest{Full: full}, progressOnly(progress))
	for i := range rep.Report.Problems {
		p := &rep.Report.Problems[i]
		e := errorReply{Error: p.Message}
		if i < len(rep.Codes) {
			e.Code = rep.Codes[i]
		}
		p.Err = e.err()
	}
	return rep.Report, err
}

// progressOnly adapts a progress callback (nil: none) to DoStream.
func progressOnly(fn func(snapshot.Progress)) func(snapshot.Progress) error {
	return func(p snapshot.Progress) error {
		if fn != nil {
			fn(p)
		}
		return nil
	}
}
