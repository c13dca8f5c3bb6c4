package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache"
	afs "github.com/agentfs/agentfs/fs"
)

// Backend is what the control server asks of a running mount. Its methods
// are called from the server's request goroutines, possibly concurrently.
// A Backend that also implements History serves snapshots, restores, diffs
// and the rest of the volume's history (see History).
type Backend interface {
	// Sync returns once everything written to the mount before the call
	// is in the blob store and committed (cache.Volume.Sync).
	Sync(ctx context.Context) error
	// Status returns the engine's state (cache.Volume.Status).
	Status(ctx context.Context) (cache.Status, error)
	// Unmount syncs, detaches the mount and returns once the volume is
	// closed, so that the whole mount is durable. Without force a busy
	// mount fails with an error matching ErrBusy and stays mounted; with
	// force it is detached lazily and Unmount returns without waiting for
	// its last users.
	Unmount(ctx context.Context, force bool) error
	// Ops returns the FUSE request counters (fs.Server.Ops).
	Ops() []afs.OpStats
	// Invalidate makes the kernel forget what inv names.
	Invalidate(inv Invalidation) error
}

// Server answers control requests for one mount.
type Server struct {
	info    Info
	b       Backend
	metrics *blobstore.Metrics
	log     *slog.Logger
	http    *http.Server
}

// NewServer returns the control server of the mount described by info.
// metrics are the blob store's counters (may be nil: Stats are then 0).
// It answers every registered call (see Call) and, at MetricsPath, the
// mount's Prometheus metrics.
func NewServer(info Info, b Backend, metrics *blobstore.Metrics, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{info: info, b: b, metrics: metrics, log: log}
	mux := http.NewServeMux()
	for name, h := range registry {
		mux.HandleFunc("POST /v1/"+name, h(s))
	}
	mux.Handle("GET "+MetricsPath, s.MetricsHandler())
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return s
}

// Serve answers requests on l until Shutdown. It returns nil after
// Shutdown.
func (s *Server) Serve(l net.Listener) error {
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting requests and waits for those in progress (an
// unmount request answers only once the volume is closed) until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// The calls every mount answers.
var (
	// InfoCall identifies the mount.
	InfoCall = newCall("info", func(_ context.Context, s *Server, _ struct{}) (Info, error) {
		return s.info, nil
	})
	// StatusCall returns the mount's state: the engine's status, the blob
	// store's counters, the FUSE counters, refs and retention.
	StatusCall = newCall("status", func(ctx context.Context, s *Server, _ struct{}) (Status, error) {
		vs, err := s.b.Status(ctx)
		if err != nil {
			return Status{}, err
		}
		return Status{Info: s.info, Volume: vs, Store: s.stats(), FUSE: s.b.Ops(), Refs: s.refCounts(ctx),
			Retention: s.statusRetention(ctx)}, nil
	})
	// StatsCall returns the mount's cumulative counters.
	StatsCall = newCall("stats", func(_ context.Context, s *Server, _ struct{}) (Stats, error) {
		return s.stats(), nil
	})
	// SyncCall returns once everything written before is committed.
	SyncCall = newCall("sync", func(ctx context.Context, s *Server, _ struct{}) (struct{}, error) {
		return struct{}{}, s.b.Sync(ctx)
	})
	// UnmountCall syncs, unmounts and closes the volume (Backend.Unmount).
	UnmountCall = newCall("unmount", func(ctx context.Context, s *Server, req UnmountRequest) (struct{}, error) {
		return struct{}{}, s.b.Unmount(ctx, req.Force)
	})
	// InvalidateCall makes the kernel forget what the request names.
	InvalidateCall = newCall("invalidate", func(_ context.Context, s *Server, inv Invalidation) (struct{}, error) {
		if !inv.All && inv.Ino == 0 && (inv.Parent == 0 || inv.Name == "") {
			return struct{}{}, fmt.Errorf("invalidate: name an inode, an entry (parent and name) or all: %w", ErrBadRequest)
		}
		return struct{}{}, s.b.Invalidate(inv)
	})
)

// UnmountRequest asks a mount to unmount (see Client.Unmount).
type UnmountRequest struct {
	Force bool `json:"force,omitempty"`
}

// stats reads the blob store's counters.
func (s *Server) stats() Stats {
	var st Stats
	if s.metrics == nil {
		return st
	}
	for _, op := range blobstore.Ops() {
		o := s.metrics.Snapshot(op)
		for kind, n := range o.Errors {
			// A missing key or a lost create race is an answer, not a
			// failure (the engine probes for both).
			if kind != blobstore.KindNotFound && kind != blobstore.KindExists {
				st.BlobErrors += n
			}
		}
		switch op {
		case blobstore.OpGet:
			st.BlobGets += o.Calls
			st.BytesDownloaded += o.Bytes
		case blobstore.OpPut, blobstore.OpPutIfAbsent:
			st.BlobPuts += o.Calls
			st.BytesUploaded += o.Bytes
		}
	}
	return st
}
