package serve

import (
	"net/http"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/apierr"
	"github.com/agentfs/agentfs/serve/workspace"
)

// maxLifetime caps a workspace's lifetime (about 100 years).
const maxLifetime = 100 * 365 * 24 * time.Hour

// createWorkspace answers POST /v1/workspaces.
func (s *Server) createWorkspace(c *call) error {
	var req api.CreateWorkspace
	if err := decode(c.r, &req); err != nil {
		return err
	}
	// Compared in seconds: a huge value would overflow a Duration.
	if !(req.Lifetime >= 0 && req.Lifetime <= maxLifetime.Seconds()) {
		return invalid("lifetime %v: seconds, from 0 (none) to %v", req.Lifetime, maxLifetime.Seconds())
	}
	var spec *exec.Spec
	if req.Backend != nil {
		// The same fields: a change to one fails to compile here.
		s := exec.Spec(*req.Backend)
		spec = &s
	}
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	in, err := s.mgr.Create(ctx, workspace.CreateRequest{
		Name: req.Name, From: req.From, Virtual: req.Virtual, Base: req.Base,
		Lifetime:       time.Duration(req.Lifetime * float64(time.Second)),
		DeleteOnExpiry: req.DeleteOnExpiry, Metadata: req.Metadata, Backend: spec,
	})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusCreated, apiWorkspace(in))
	return nil
}

// listWorkspaces answers GET /v1/workspaces.
func (s *Server) listWorkspaces(c *call) error {
	list, err := s.mgr.List(c.r.Context())
	if err != nil {
		return err
	}
	out := api.WorkspaceList{Workspaces: make([]api.Workspace, len(list))}
	for i, in := range list {
		out.Workspaces[i] = apiWorkspace(in)
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// getWorkspace answers GET /v1/workspaces/{name}.
func (s *Server) getWorkspace(c *call) error {
	in, err := s.mgr.Get(c.r.Context(), c.r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, apiWorkspace(in))
	return nil
}

// deleteWorkspace answers DELETE /v1/workspaces/{name}: its jobs are
// killed, then it is deleted (see workspace.Manager.Delete) and its tokens
// revoked.
func (s *Server) deleteWorkspace(c *call) error {
	name := c.r.PathValue("name")
	if _, err := s.mgr.Get(c.r.Context(), name); err != nil {
		return err
	}
	s.jobs.killWorkspace(name)
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	if err := s.mgr.Delete(ctx, name); err != nil {
		return err
	}
	if _, err := s.tokens.revoke(func(r tokenRecord) bool { return r.Workspace == name }); err != nil {
		return apierr.From(err, "")
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// apiWorkspace is a workspace as the API shows it.
func apiWorkspace(in workspace.Info) api.Workspace {
	return api.Workspace{
		Name: in.Name, Branch: in.Branch, Status: string(in.Status), HeadCommit: in.HeadCommit,
		BytesWaiting: in.BytesWaiting, Created: in.Created.UTC(), LastUsed: in.LastUsed.UTC(),
		ExpiresAt: in.ExpiresAt, DeleteOnExpiry: in.DeleteOnExpiry, Expired: in.Expired,
		Virtual: in.Virtual, Base: in.Base, From: in.From, Metadata: in.Metadata,
		Backend: api.Backend(in.Backend),
	}
}
