package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
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
func NewServer(info Info, b Backend, metrics *blobstore.Metrics, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	s := &Server{info: info, b: b, metrics: metrics, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/info", s.handleInfo)
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	mux.HandleFunc("GET /v1/stats", s.handleStats)
	mux.HandleFunc("POST /v1/sync", s.handleSync)
	mux.HandleFunc("POST /v1/unmount", s.handleUnmount)
	mux.HandleFunc("POST /v1/invalidate", s.handleInvalidate)
	mux.HandleFunc("GET /v1/changes", s.handleChanges)
	mux.Handle("GET "+MetricsPath, s.MetricsHandler())
	s.registerHistory(mux)
	mux.HandleFunc("POST /v1/virtual/diff", s.handleVirtualDiff)
	mux.HandleFunc("POST /v1/virtual/commit", s.handleVirtualCommit)
	mux.HandleFunc("POST /v1/virtual/discard", s.handleVirtualDiscard)
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

func (s *Server) handleInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.info)
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	vs, err := s.b.Status(r.Context())
	if err != nil {
		s.fail(w, "status", err)
		return
	}
	writeJSON(w, http.StatusOK, Status{Info: s.info, Volume: vs, Store: s.stats(), FUSE: s.b.Ops(), Refs: s.refCounts(r.Context()),
		Retention: s.statusRetention(r.Context())})
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.stats())
}

func (s *Server) handleSync(w http.ResponseWriter, r *http.Request) {
	if err := s.b.Sync(r.Context()); err != nil {
		s.fail(w, "sync", err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) handleUnmount(w http.ResponseWriter, r *http.Request) {
	force := r.URL.Query().Get("force") == "1"
	if err := s.b.Unmount(r.Context(), force); err != nil {
		s.fail(w, "unmount", err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) handleInvalidate(w http.ResponseWriter, r *http.Request) {
	var inv Invalidation
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&inv); err != nil {
		writeJSON(w, http.StatusBadRequest, errorReply{Error: "invalidate: bad request: " + err.Error()})
		return
	}
	if !inv.All && inv.Ino == 0 && (inv.Parent == 0 || inv.Name == "") {
		writeJSON(w, http.StatusBadRequest, errorReply{Error: "invalidate: name an inode, an entry (parent and name) or all"})
		return
	}
	if err := s.b.Invalidate(inv); err != nil {
		s.fail(w, "invalidate", err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
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

func (s *Server) fail(w http.ResponseWriter, op string, err error) {
	rep := errorReply{Error: err.Error()}
	code := http.StatusInternalServerError
	if errors.Is(err, ErrBusy) {
		rep.Code, code = codeBusy, http.StatusConflict
	} else if vc := virtualCode(err); vc != "" {
		rep.Code, code = vc, http.StatusConflict
	}
	if errors.Is(err, context.Canceled) {
		code = 499 // the client went away
	}
	s.log.Debug("control request failed", "op", op, "err", err)
	writeJSON(w, code, rep)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
