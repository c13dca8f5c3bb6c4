package control

// Retention requests: show and set the volume's retention policy, and the
// state of the gc a read-write mount runs in the background to apply it.

import (
	"context"
	"net/http"
	"time"

	"github.com/agentfs/agentfs/snapshot"
)

// Retention is a volume's retention policy as `agentfs retention show`
// and `agentfs status` report it.
type Retention struct {
	Policy snapshot.Retention `json:"policy"`
	// Stored is false when the volume has no policy of its own and
	// snapshot.DefaultRetention applies.
	Stored      bool   `json:"stored"`
	Description string `json:"description"` // Policy.String()
	// LastGC is the mount's last background gc (nil: none yet, or the
	// mount does not run one: read-only mounts).
	LastGC *AutoGCRun `json:"last_gc,omitempty"`
}

// AutoGCRun is the outcome of one background gc of a mount.
type AutoGCRun struct {
	Time          time.Time     `json:"time"`
	Duration      time.Duration `json:"duration_ns"`
	CommitsPruned int           `json:"commits_pruned"`
	PacksSwept    int           `json:"packs_swept"`
	BytesFreed    int64         `json:"bytes_freed"`
	Error         string        `json:"error,omitempty"`
	// Next is when the next run is due.
	Next time.Time `json:"next"`
}

// AutoGC is implemented by a Backend that applies its volume's retention
// in the background. LastAutoGC is called from request goroutines.
type AutoGC interface {
	LastAutoGC() *AutoGCRun
}

// RetentionRequest sets a volume's policy: Policy, or with Reset, none of
// its own (the default applies).
type RetentionRequest struct {
	Policy snapshot.Retention `json:"policy"`
	Reset  bool               `json:"reset,omitempty"`
}

// Options returns the gc options req asks for: its Policy, or the
// volume's own when Policy is nil.
func (req GCRequest) Options() snapshot.GCOptions {
	o := snapshot.GCOptions{DryRun: req.DryRun, Grace: req.Grace, VolumePolicy: req.Policy == nil}
	if req.Policy != nil {
		o.Policy = *req.Policy
	}
	return o
}

// retention returns the volume's policy, with the backend's last
// background gc.
func (s *Server) retention(ctx context.Context, h History) (Retention, error) {
	p, stored, err := h.Repo().Retention(ctx)
	if err != nil {
		return Retention{}, err
	}
	out := Retention{Policy: p, Stored: stored, Description: p.String()}
	if a, ok := s.b.(AutoGC); ok {
		out.LastGC = a.LastAutoGC()
	}
	return out, nil
}

// statusRetention is Status.Retention: nil when the backend serves no
// history or reading the policy fails.
func (s *Server) statusRetention(ctx context.Context) *Retention {
	h, ok := s.b.(History)
	if !ok {
		return nil
	}
	ret, err := s.retention(ctx, h)
	if err != nil {
		s.log.Debug("reading the retention policy failed", "err", err)
		return nil
	}
	return &ret
}

func (s *Server) handleGetRetention(w http.ResponseWriter, r *http.Request, h History) {
	ret, err := s.retention(r.Context(), h)
	if err != nil {
		s.failHistory(w, "retention", err)
		return
	}
	writeJSON(w, http.StatusOK, ret)
}

func (s *Server) handleSetRetention(w http.ResponseWriter, r *http.Request, h History) {
	var req RetentionRequest
	if err := decodeBody(r, &req); err != nil {
		s.failHistory(w, "retention set", err)
		return
	}
	var err error
	if req.Reset {
		err = h.Repo().ResetRetention(r.Context())
	} else {
		err = h.Repo().SetRetention(r.Context(), req.Policy)
	}
	if err != nil {
		s.failHistory(w, "retention set", err)
		return
	}
	s.handleGetRetention(w, r, h)
}

// Retention returns the volume's retention policy and the mount's last
// background gc.
func (c *Client) Retention(ctx context.Context) (Retention, error) {
	var out Retention
	err := c.do(ctx, http.MethodGet, "/v1/history/retention", &out)
	return out, err
}

// SetRetention stores req's policy as the volume's (or, with Reset,
// removes the volume's own) and returns the policy now in force.
func (c *Client) SetRetention(ctx context.Context, req RetentionRequest) (Retention, error) {
	var out Retention
	err := c.post(ctx, "/v1/history/retention", req, &out)
	return out, err
}
