package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentfs/agentfs/serve/workspace"
)

// Defaults of Options fields left zero.
const (
	DefaultRequestTimeout = time.Minute
	DefaultMaxBodyBytes   = 1 << 30 // 1 GiB: file and tar uploads
	DefaultMaxJSONBytes   = 16 << 20
	DefaultMaxCommands    = 16
	DefaultMaxJobs        = 256
	// DefaultExecTimeout is a command's timeout when its request gives
	// none, as in the agent frameworks (120 s).
	DefaultExecTimeout = 120 * time.Second
	// MaxExecTimeout caps a command's timeout; run longer work as a job.
	MaxExecTimeout = 24 * time.Hour
)

// Options configure a Server.
type Options struct {
	// Manager owns the workspaces; required. The Server does not close it.
	Manager *workspace.Manager
	// AdminToken authorizes every route; required (New refuses "").
	AdminToken string
	// StateDir holds the hashed workspace tokens (tokens.json); required.
	StateDir string
	// RequestTimeout is the deadline of a request (a command's is its
	// timeout plus this); 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxBodyBytes caps the body of a file or tar upload; 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxJSONBytes caps a JSON request body; 0 means DefaultMaxJSONBytes.
	MaxJSONBytes int64
	// MaxCommands caps the commands (exec and jobs) running at once in one
	// workspace; 0 means DefaultMaxCommands. Past it, busy (429).
	MaxCommands int
	// MaxJobs caps the background jobs running at once in the whole
	// server; 0 means DefaultMaxJobs. Past it, busy (429).
	MaxJobs int
	// NoMCP turns off the MCP endpoint (serve/mcp's tools over streamable
	// HTTP at /mcp, behind the same authentication: a workspace token
	// selects its workspace, the admin token names one as /mcp/NAME).
	NoMCP bool
	// Logger receives one line per failed request and the server's events;
	// nil discards them.
	Logger *slog.Logger
	// Registerer receives the server's Prometheus metrics, which are
	// served at GET /metrics with everything else it gathers; nil means a
	// registry of the server's own.
	Registerer *prometheus.Registry
	// Version is reported by GET /healthz; "" means "dev".
	Version string
	// Keepalive is how often a change feed (GET .../changes) with nothing
	// to say sends a comment line; 0 means DefaultKeepalive.
	Keepalive time.Duration
}

// Server is the HTTP API. Create it with New; serve Handler with any
// http.Server, or call Serve, which sets the timeouts.
type Server struct {
	opts           Options
	mgr            *workspace.Manager
	log            *slog.Logger
	tokens         *tokenStore
	mux            *http.ServeMux
	routes         []route
	metrics        *metrics
	jobs           *jobTable
	limits         *limiter
	metricsHandler http.Handler
	mcp            http.Handler // nil with NoMCP

	// base is the parent of every request's context: Shutdown cancels it,
	// which kills the commands requests are waiting for.
	base       context.Context
	cancelBase context.CancelFunc

	mu  sync.Mutex
	srv []*http.Server // guarded by mu; those started by Serve
}

// New returns a Server over opts.Manager.
func New(opts Options) (*Server, error) {
	if opts.Manager == nil {
		return nil, errors.New("serve: Options.Manager is required")
	}
	if opts.AdminToken == "" {
		return nil, errors.New("serve: an admin token is required (--token-file or AGENTFS_TOKEN)")
	}
	if opts.StateDir == "" {
		return nil, errors.New("serve: Options.StateDir is required")
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxJSONBytes <= 0 {
		opts.MaxJSONBytes = DefaultMaxJSONBytes
	}
	if opts.MaxCommands <= 0 {
		opts.MaxCommands = DefaultMaxCommands
	}
	if opts.MaxJobs <= 0 {
		opts.MaxJobs = DefaultMaxJobs
	}
	if opts.Keepalive <= 0 {
		opts.Keepalive = DefaultKeepalive
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tokens, err := openTokens(opts.StateDir, opts.AdminToken)
	if err != nil {
		return nil, err
	}
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{opts: opts, mgr: opts.Manager, log: log, tokens: tokens, mux: http.NewServeMux(),
		limits: newLimiter(opts.MaxCommands, opts.MaxJobs)}
	s.jobs = newJobTable()
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.metrics, err = newMetrics(reg, s)
	if err != nil {
		return nil, err
	}
	s.register(reg)
	return s, nil
}

// Handler is the server's HTTP handler (every route, /mcp included).
func (s *Server) Handler() http.Handler { return s.mux }

// Serve accepts connections on ln until Shutdown, with the server's
// timeouts set; with tlsConfig it serves HTTPS. It returns
// http.ErrServerClosed after Shutdown.
func (s *Server) Serve(ln net.Listener, tlsConfig *tls.Config) error {
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		// No ReadTimeout or WriteTimeout for the whole server: uploads and
		// commands are long. Each request sets its own deadlines (see
		// route.serveHTTP).
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		TLSConfig:      tlsConfig,
		BaseContext:    func(net.Listener) context.Context { return s.base },
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	s.srv = append(s.srv, srv)
	s.mu.Unlock()
	if tlsConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// Shutdown stops the server: listeners close, the commands that requests
// wait for are killed (their requests end with the result so far), every
// background job is killed and its workspace released; then it waits for
// the requests to end, until ctx ends. It does not close the Manager (the
// caller does, which syncs and unmounts every workspace).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srvs := s.srv
	s.mu.Unlock()
	for _, srv := range srvs {
		// Stop accepting first; Shutdown itself waits for the requests.
		srv.SetKeepAlivesEnabled(false)
	}
	s.cancelBase()
	s.jobs.killAll()
	var errs []error
	for _, srv := range srvs {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
	}
	return errors.Join(errs...)
}

// OnExpire is the workspace.Config.OnExpire hook: it kills the jobs of the
// workspace whose lifetime ended. Set it in the Manager's Config through a
// closure, as the Server is created after the Manager.
func (s *Server) OnExpire(name string) { s.jobs.killWorkspace(name) }
