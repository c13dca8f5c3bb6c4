package control

// Retention requests: show and set the volume's retention policy, and the
// state of the gc a read-write mount runs in the background to apply it.

import (
	"context"
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

// The retention calls (history calls: ErrNoHistory on a mount without).
var (
	// RetentionCall answers the volume's policy and the mount's last
	// background gc.
	RetentionCall = newCall("history/retention", func(ctx context.Context, s *Server, _ struct{}) (Retention, error) {
		h, err := s.history()
		if err != nil {
			return Retention{}, err
		}
		return s.retention(ctx, h)
	})
	// SetRetentionCall stores the request's policy (or, with Reset,
	// removes the volume's own) and answers the policy now in force.
	SetRetentionCall = newCall("history/retention/set", func(ctx context.Context, s *Server, req RetentionRequest) (Retention, error) {
		h, err := s.history()
		if err != nil {
			return Retention{}, err
		}
		if req.Reset {
			err = h.Repo().ResetRetention(ctx)
		} else {
			err = h.Repo().SetRetention(ctx, req.Policy)
		}
		if err != nil {
			return Retention{}, err
		}
		return s.retention(ctx, h)
	})
)

// Retention returns the volume's retention policy and the mount's last
// background gc.
func (c *Client) Retention(ctx context.Context) (Retention, error) {
	return Do(ctx, c, RetentionCall, struct{}{})
}

// SetRetention stores req's policy as the volume's (or, with Reset,
// removes the volume's own) and returns the policy now in force.
func (c *Client) SetRetention(ctx context.Context, req RetentionRequest) (Retention, error) {
	return Do(ctx, c, SetRetentionCall, req)
}
