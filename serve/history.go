package serve

import (
	"net/http"
	"path"
	"strings"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/workspace"
	"github.com/agentfs/agentfs/snapshot"
)

// History goes through the mount's control socket: the mount server
// checkpoints the live state and answers with its own open volume.

// treePath checks a path of the volume's history (a diff's directory, a
// virtual workspace's change): relative, and not climbing out with "..".
// Symlinks are not followed in history, so they cannot lead out. It
// returns the path cleaned ("" for the root).
func treePath(op, p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return "", &exec.PathError{Op: op, Path: p, Reason: "absolute path"}
	}
	clean := path.Clean("/" + p)
	if clean != "/"+strings.TrimSuffix(path.Clean(p), "/") && p != "" && path.Clean(p) != "." {
		return "", &exec.PathError{Op: op, Path: p, Reason: `".." climbs out of the root`}
	}
	return strings.TrimPrefix(clean, "/"), nil
}

func apiSnapshot(s snapshot.Snapshot) api.Snapshot {
	return api.Snapshot{Name: s.Name, Commit: s.Commit.String(), Time: s.Time.UTC(), Kind: s.Kind, Message: s.Message}
}

// saveSnapshot answers POST .../snapshots: the workspace's state now
// becomes snapshot NAME of the volume (201).
func (s *Server) saveSnapshot(c *call) error {
	var req api.SaveSnapshot
	if err := decode(c.r, &req); err != nil {
		return err
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	snap, err := c.ws.Control.SaveSnapshot(ctx, req.Name, req.Message)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, apiSnapshot(snap))
	return nil
}

// listSnapshots answers GET .../snapshots (?unique=1 computes what each
// would free).
func (s *Server) listSnapshots(c *call) error {
	unique, err := queryBool(c.r, "unique")
	if err != nil {
		return err
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	list, err := c.ws.Control.ListSnapshots(ctx, unique)
	if err != nil {
		return err
	}
	out := api.SnapshotList{Snapshots: make([]api.Snapshot, len(list))}
	for i, si := range list {
		out.Snapshots[i] = apiSnapshot(si.Snapshot)
		if unique {
			u := si.UniqueBytes
			out.Snapshots[i].UniqueBytes = &u
		}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// deleteSnapshot answers DELETE .../snapshots/{snap}.
func (s *Server) deleteSnapshot(c *call) error {
	if err := c.ws.Control.DeleteSnapshot(c.r.Context(), c.r.PathValue("snap")); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// restoreSnapshot answers POST .../snapshots/{snap}/restore: the live
// workspace becomes the snapshot at once; its state before is kept as an
// automatic snapshot.
func (s *Server) restoreSnapshot(c *call) error {
	var req api.Restore
	if c.r.ContentLength != 0 {
		if err := decode(c.r, &req); err != nil {
			return err
		}
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	res, err := c.ws.Control.Restore(ctx, c.r.PathValue("snap"), req.Message)
	if err != nil {
		return err
	}
	out := api.RestoreResult{Commit: res.Commit.ID.String()}
	if res.Saved != nil {
		out.Saved = res.Saved.Name
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// diff answers POST .../diff.
func (s *Server) diff(c *call) error {
	var req api.Diff
	if err := decode(c.r, &req); err != nil {
		return err
	}
	if req.From == "" {
		return invalid("from: required (a snapshot, a workspace, BRANCH@SEQ or live)")
	}
	if req.To == "" {
		req.To = control.Live
	}
	c.path = req.Path
	dir, err := treePath("diff", req.Path)
	if err != nil {
		return err
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	out := api.DiffResult{Changes: []api.HistoryChange{}}
	res, err := c.ws.Control.Diff(ctx, control.DiffRequest{A: req.From, B: req.To, Dir: dir, Patch: req.Patch}, func(ch histdiff.Change) error {
		out.Changes = append(out.Changes, api.HistoryChange{Op: ch.Op, Path: ch.Path, Type: ch.Type,
			OldSize: ch.OldSize, NewSize: ch.NewSize, What: ch.What, Patch: ch.Patch})
		return nil
	})
	if err != nil {
		return err
	}
	out.From, out.To = res.A.String(), res.B.String()
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// fork answers POST .../fork: a new workspace from this one's head (or
// from a snapshot), as POST /v1/workspaces with from would make it.
func (s *Server) fork(c *call) error {
	var req api.Fork
	if err := decode(c.r, &req); err != nil {
		return err
	}
	from := c.r.PathValue("name")
	if req.Snapshot != "" {
		from = "snapshot:" + req.Snapshot
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	in, err := s.mgr.Create(ctx, workspace.CreateRequest{Name: req.Name, From: from})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, apiWorkspace(in))
	return nil
}

// branches answers GET .../branches: the branches of the daemon's volume.
func (s *Server) branches(c *call) error {
	list, err := c.ws.Control.Branches(c.r.Context())
	if err != nil {
		return err
	}
	out := api.BranchList{Branches: make([]api.Branch, len(list))}
	for i, b := range list {
		out.Branches[i] = api.Branch{Name: b.Name, Head: b.Head.ID.String(), Writer: b.Lease != nil && b.Lease.Live}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// virtualOps are overlay's change letters as the API spells them.
var virtualOps = map[overlay.ChangeOp]string{
	overlay.Added: "added", overlay.Modified: "modified", overlay.Deleted: "deleted", overlay.Renamed: "renamed",
}

func apiVirtualChange(ch overlay.Change, p *overlay.FilePatch) api.VirtualChange {
	out := api.VirtualChange{Op: virtualOps[ch.Op], Path: ch.Path, From: ch.From, Type: ch.Type.String(), Size: ch.Size, OldSize: ch.OldSize}
	if p != nil {
		added, deleted := p.Added, p.Deleted
		out.Added, out.Deleted, out.Binary, out.Patch = &added, &deleted, p.Binary, p.Text
	}
	return out
}

func apiVirtualChanges(list []overlay.Change) []api.VirtualChange {
	out := make([]api.VirtualChange, len(list))
	for i, ch := range list {
		out[i] = apiVirtualChange(ch, nil)
	}
	return out
}

// virtualDiff answers POST .../virtual/diff: a virtual workspace's changes
// over its base.
func (s *Server) virtualDiff(c *call) error {
	var req api.VirtualDiff
	if err := decode(c.r, &req); err != nil {
		return err
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	res, err := c.ws.Control.VirtualDiff(ctx, control.VirtualDiffRequest{Paths: req.Paths, Stat: req.Stat, Patch: req.Patch})
	if err != nil {
		return err
	}
	out := api.VirtualDiffResult{Base: res.Base, Changes: make([]api.VirtualChange, len(res.Changes))}
	for i, ch := range res.Changes {
		out.Changes[i] = apiVirtualChange(ch.Change, ch.Patch)
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// virtualCommit answers POST .../virtual/commit.
func (s *Server) virtualCommit(c *call) error {
	var req api.VirtualCommit
	if err := decode(c.r, &req); err != nil {
		return err
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	res, err := c.ws.Control.Commit(ctx, control.CommitRequest{Paths: req.Paths, Message: req.Message, Snapshot: req.Snapshot, Force: req.Force})
	if err != nil {
		return err
	}
	out := api.VirtualCommitResult{Changes: apiVirtualChanges(res.Changes), Pending: res.Pending}
	if res.Commit != nil {
		out.Commit = res.Commit.String()
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// virtualDiscard answers POST .../virtual/discard.
func (s *Server) virtualDiscard(c *call) error {
	var req api.VirtualDiscard
	if err := decode(c.r, &req); err != nil {
		return err
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	res, err := c.ws.Control.Discard(ctx, control.DiscardRequest{Paths: req.Paths})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, api.VirtualDiscardResult{Discarded: apiVirtualChanges(res.Discarded), Pending: res.Pending})
	return nil
}
