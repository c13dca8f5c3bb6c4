package control

import (
	"context"
	"fmt"

	"github.com/agentfs/agentfs/overlay"
)

// VirtualInfo describes the workspace of a virtual mount (Info.Virtual).
type VirtualInfo struct {
	// Name of the workspace; its changes live on branch overlay.BranchName(Name).
	Name string `json:"name"`
	// HostDir is the host directory the workspace is over, if it is.
	HostDir string `json:"host_dir,omitempty"`
	// Base is the reference the mount was asked for ("" for a host
	// directory); the commit the workspace is over now is in VirtualDiffReply.Base.
	Base string `json:"base,omitempty"`
}

// VirtualBackend is what a virtual mount's Backend adds: the workspace's
// diff, commit and discard (overlay.Workspace). The control server answers
// these requests with an error matching ErrNotVirtual when its Backend
// does not implement it.
type VirtualBackend interface {
	// Diff lists the workspace's changes relative to its base.
	Diff(ctx context.Context, req VirtualDiffRequest) (VirtualDiffReply, error)
	// Commit accepts changes (overlay.Workspace.Commit).
	Commit(ctx context.Context, req CommitRequest) (overlay.CommitResult, error)
	// Discard drops changes (overlay.Workspace.Discard).
	Discard(ctx context.Context, req DiscardRequest) (DiscardReply, error)
}

// ErrNotVirtual: the mount is not a virtual mount.
var ErrNotVirtual = overlay.ErrNotVirtual

// VirtualDiffRequest asks for a virtual mount's changes.
type VirtualDiffRequest struct {
	// Paths limits the answer to these paths and what lies below them
	// (relative to the mount's root; none: everything).
	Paths []string `json:"paths,omitempty"`
	// Stat asks for each file's added and deleted line counts; Patch for
	// those and the unified diffs.
	Stat  bool `json:"stat,omitempty"`
	Patch bool `json:"patch,omitempty"`
	// MaxBytes is the largest file whose content is compared (0: 4 MiB).
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// DefaultMaxBytes is VirtualDiffRequest.MaxBytes when it is 0.
const DefaultMaxBytes = 4 << 20

// FileChange is one change of a VirtualDiffReply.
type FileChange struct {
	overlay.Change
	// Patch is set when the request asked for Stat or Patch and the change
	// concerns a regular file on either side.
	Patch *overlay.FilePatch `json:"patch,omitempty"`
}

// VirtualDiffReply is a virtual mount's changes, sorted by path.
type VirtualDiffReply struct {
	// Base describes what the changes are relative to: a host directory,
	// or a commit (and the snapshot it came from).
	Base    string       `json:"base"`
	Changes []FileChange `json:"changes"`
}

// CommitRequest asks a virtual mount to accept changes.
type CommitRequest struct {
	// Paths selects the changes to commit (and those below them); none:
	// all of them.
	Paths   []string `json:"paths,omitempty"`
	Message string   `json:"message,omitempty"`
	// Snapshot names the new commit (commit bases only).
	Snapshot string `json:"snapshot,omitempty"`
	// Force commits even where the base branch changed the same paths.
	Force bool `json:"force,omitempty"`
}

// DiscardRequest asks a virtual mount to drop changes.
type DiscardRequest struct {
	// Paths selects the changes to drop; none: all of them.
	Paths []string `json:"paths,omitempty"`
}

// DiscardReply reports what Discard dropped and what is left.
type DiscardReply struct {
	Discarded []overlay.Change `json:"discarded"`
	Pending   int              `json:"pending"`
}

// virtual returns the backend's VirtualBackend, or an error matching
// ErrNotVirtual.
func (s *Server) virtual() (VirtualBackend, error) {
	vb, ok := s.b.(VirtualBackend)
	if !ok || s.info.Virtual == nil {
		return nil, fmt.Errorf("%s is not a virtual mount (mount it with --virtual): %w", s.info.MountPoint, ErrNotVirtual)
	}
	return vb, nil
}

// The calls of a virtual mount (any other answers ErrNotVirtual).
var (
	// VirtualDiffCall answers the workspace's changes.
	VirtualDiffCall = newCall("virtual/diff", func(ctx context.Context, s *Server, req VirtualDiffRequest) (VirtualDiffReply, error) {
		vb, err := s.virtual()
		if err != nil {
			return VirtualDiffReply{}, err
		}
		rep, err := vb.Diff(ctx, req)
		if rep.Changes == nil {
			rep.Changes = []FileChange{}
		}
		return rep, err
	})
	// CommitCall accepts changes.
	CommitCall = newCall("virtual/commit", func(ctx context.Context, s *Server, req CommitRequest) (overlay.CommitResult, error) {
		vb, err := s.virtual()
		if err != nil {
			return overlay.CommitResult{}, err
		}
		rep, err := vb.Commit(ctx, req)
		if rep.Changes == nil {
			rep.Changes = []overlay.Change{}
		}
		return rep, err
	})
	// DiscardCall drops changes.
	DiscardCall = newCall("virtual/discard", func(ctx context.Context, s *Server, req DiscardRequest) (DiscardReply, error) {
		vb, err := s.virtual()
		if err != nil {
			return DiscardReply{}, err
		}
		rep, err := vb.Discard(ctx, req)
		if rep.Discarded == nil {
			rep.Discarded = []overlay.Change{}
		}
		return rep, err
	})
)

// VirtualDiff returns the changes of a virtual mount relative to its base. It
// fails with an error matching ErrNotVirtual on any other mount.
func (c *Client) VirtualDiff(ctx context.Context, req VirtualDiffRequest) (VirtualDiffReply, error) {
	return Do(ctx, c, VirtualDiffCall, req)
}

// Commit accepts the changes of a virtual mount that req selects: a new
// commit of the base's branch, or the files written to the host directory
// (overlay.Workspace.Commit). It fails with an error matching
// overlay.ErrConflict when the base branch changed the same paths (and
// req.Force is not set), and ErrNotVirtual on a mount that is not virtual.
func (c *Client) Commit(ctx context.Context, req CommitRequest) (overlay.CommitResult, error) {
	return Do(ctx, c, CommitCall, req)
}

// Discard drops the changes of a virtual mount that req selects; the
// mount shows the base at those paths at once. It fails with an error
// matching ErrNotVirtual on a mount that is not virtual.
func (c *Client) Discard(ctx context.Context, req DiscardRequest) (DiscardReply, error) {
	return Do(ctx, c, DiscardCall, req)
}
