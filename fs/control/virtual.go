package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

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

const (
	codeNotVirtual   = "not_virtual"
	codeConflict     = "conflict"
	codeNeedParent   = "need_parent"
	codeBaseMismatch = "base_mismatch"
	codeEntangled    = "entangled"
)

func (s *Server) virtual(w http.ResponseWriter) (VirtualBackend, bool) {
	vb, ok := s.b.(VirtualBackend)
	if !ok || s.info.Virtual == nil {
		writeJSON(w, http.StatusBadRequest, errorReply{
			Error: fmt.Sprintf("%s is not a virtual mount (mount it with --virtual): %v", s.info.MountPoint, ErrNotVirtual),
			Code:  codeNotVirtual})
		return nil, false
	}
	return vb, true
}

// decode reads a JSON request body into v; it answers 400 and returns
// false if it cannot.
func decode(w http.ResponseWriter, r *http.Request, op string, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, errorReply{Error: op + ": bad request: " + err.Error()})
		return false
	}
	return true
}

func (s *Server) handleVirtualDiff(w http.ResponseWriter, r *http.Request) {
	vb, ok := s.virtual(w)
	var req VirtualDiffRequest
	if !ok || !decode(w, r, "diff", &req) {
		return
	}
	rep, err := vb.Diff(r.Context(), req)
	if err != nil {
		s.fail(w, "diff", err)
		return
	}
	if rep.Changes == nil {
		rep.Changes = []FileChange{}
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) handleVirtualCommit(w http.ResponseWriter, r *http.Request) {
	vb, ok := s.virtual(w)
	var req CommitRequest
	if !ok || !decode(w, r, "commit", &req) {
		return
	}
	rep, err := vb.Commit(r.Context(), req)
	if err != nil {
		s.fail(w, "commit", err)
		return
	}
	if rep.Changes == nil {
		rep.Changes = []overlay.Change{}
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) handleVirtualDiscard(w http.ResponseWriter, r *http.Request) {
	vb, ok := s.virtual(w)
	var req DiscardRequest
	if !ok || !decode(w, r, "discard", &req) {
		return
	}
	rep, err := vb.Discard(r.Context(), req)
	if err != nil {
		s.fail(w, "discard", err)
		return
	}
	if rep.Discarded == nil {
		rep.Discarded = []overlay.Change{}
	}
	writeJSON(w, http.StatusOK, rep)
}

// VirtualDiff returns the changes of a virtual mount relative to its base. It
// fails with an error matching ErrNotVirtual on any other mount.
func (c *Client) VirtualDiff(ctx context.Context, req VirtualDiffRequest) (VirtualDiffReply, error) {
	var rep VirtualDiffReply
	err := c.postJSON(ctx, "/v1/virtual/diff", req, &rep)
	return rep, err
}

// Commit accepts the changes of a virtual mount that req selects: a new
// commit of the base's branch, or the files written to the host directory
// (overlay.Workspace.Commit). It fails with an error matching
// overlay.ErrConflict when the base branch changed the same paths (and
// req.Force is not set), and ErrNotVirtual on a mount that is not virtual.
func (c *Client) Commit(ctx context.Context, req CommitRequest) (overlay.CommitResult, error) {
	var rep overlay.CommitResult
	err := c.postJSON(ctx, "/v1/virtual/commit", req, &rep)
	return rep, err
}

// Discard drops the changes of a virtual mount that req selects; the
// mount shows the base at those paths at once. It fails with an error
// matching ErrNotVirtual on a mount that is not virtual.
func (c *Client) Discard(ctx context.Context, req DiscardRequest) (DiscardReply, error) {
	var rep DiscardReply
	err := c.postJSON(ctx, "/v1/virtual/discard", req, &rep)
	return rep, err
}

// postJSON sends req as JSON and decodes the reply into out.
func (c *Client) postJSON(ctx context.Context, path string, req, out any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return c.doBody(ctx, http.MethodPost, path, bytes.NewReader(b), out)
}

// virtualCodes are the errors of virtual mounts that keep their identity
// across the socket: the client's error matches the same sentinel with
// errors.Is.
var virtualCodes = map[string]error{
	codeNotVirtual:   ErrNotVirtual,
	codeConflict:     overlay.ErrConflict,
	codeNeedParent:   overlay.ErrNeedParent,
	codeBaseMismatch: overlay.ErrBaseMismatch,
	codeEntangled:    overlay.ErrEntangled,
}

// virtualError rebuilds a virtual mount's error from its reply, or returns
// nil if its code is none of virtualCodes.
func virtualError(e errorReply) error {
	kind, ok := virtualCodes[e.Code]
	if !ok {
		return nil
	}
	return fmt.Errorf("%s: %w", strings.TrimSuffix(e.Error, ": "+kind.Error()), kind)
}

// virtualCode returns the code of err's virtual-mode sentinel, or "".
func virtualCode(err error) string {
	for code, kind := range virtualCodes {
		if errors.Is(err, kind) {
			return code
		}
	}
	return ""
}
