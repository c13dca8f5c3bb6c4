package serve

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/apierr"
	"github.com/agentfs/agentfs/serve/mcp"
	"github.com/agentfs/agentfs/serve/workspace"
)

// access is who may call a route.
type access int

const (
	public    access = iota // no token (GET /healthz)
	adminOnly               // the admin token
	anyToken                // any valid token (the route checks the rest)
	wsRead                  // admin, or a token of the route's workspace
	wsWrite                 // admin, or a read-write token of the route's workspace
)

// body is how a route reads its request body.
type body int

const (
	noBody   body = iota
	jsonBody      // capped at MaxJSONBytes
	rawBody       // capped at MaxBodyBytes
)

// call is one request as a handler sees it.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	caller Caller
	// ws is the pinned workspace of a route with mount set; nil otherwise.
	ws *workspace.Handle
	// held is set by hold: the handler took over the release of ws.
	held bool
	// path is the workspace path the request names, for error bodies.
	path string
}

// hold hands the release of the pinned workspace to the caller (a job
// that outlives the request).
func (c *call) hold() *workspace.Handle {
	c.held = true
	return c.ws
}

// handler serves one route. A returned error becomes the error body
// (unless the handler already wrote a response).
type handler func(c *call) error

// route is one entry of the API.
type route struct {
	method string
	// pattern is the path as net/http.ServeMux takes it; OpenAPI spells
	// "{path...}" as "{path}".
	pattern string
	access  access
	body    body
	// mount pins the workspace {name} for the request.
	mount bool
	// long: the handler sets its own deadline (commands, waits, streams).
	long bool
	h    handler
}

// routes is the API, in the order of the OpenAPI document.
func (s *Server) routeTable() []route {
	const ws = "/v1/workspaces/{name}"
	return []route{
		{method: "GET", pattern: "/healthz", access: public, h: s.healthz},
		{method: "GET", pattern: "/metrics", access: adminOnly, h: s.serveMetrics},
		{method: "GET", pattern: "/v1/openapi.json", access: public, h: serveOpenAPI},

		{method: "POST", pattern: "/v1/workspaces", access: adminOnly, body: jsonBody, long: true, h: s.createWorkspace},
		{method: "GET", pattern: "/v1/workspaces", access: adminOnly, h: s.listWorkspaces},
		{method: "GET", pattern: ws, access: wsRead, h: s.getWorkspace},
		{method: "DELETE", pattern: ws, access: adminOnly, long: true, h: s.deleteWorkspace},

		{method: "POST", pattern: "/v1/tokens", access: adminOnly, body: jsonBody, h: s.createToken},
		{method: "GET", pattern: "/v1/tokens", access: adminOnly, h: s.listTokens},
		{method: "DELETE", pattern: "/v1/tokens/{id}", access: adminOnly, h: s.deleteToken},

		{method: "POST", pattern: ws + "/exec", access: wsWrite, body: jsonBody, mount: true, long: true, h: s.exec},
		{method: "POST", pattern: ws + "/exec/stream", access: wsWrite, body: jsonBody, mount: true, long: true, h: s.execStream},

		{method: "POST", pattern: ws + "/jobs", access: wsWrite, body: jsonBody, mount: true, h: s.startJob},
		{method: "GET", pattern: ws + "/jobs", access: wsRead, h: s.listJobs},
		{method: "GET", pattern: ws + "/jobs/{id}", access: wsRead, h: s.getJob},
		{method: "POST", pattern: ws + "/jobs/{id}/wait", access: wsRead, long: true, h: s.waitJob},
		{method: "POST", pattern: ws + "/jobs/{id}/kill", access: wsWrite, h: s.killJob},
		{method: "GET", pattern: ws + "/jobs/{id}/output", access: wsRead, h: s.jobOutput},

		{method: "GET", pattern: ws + "/files/{path...}", access: wsRead, mount: true, h: s.readFile},
		{method: "PUT", pattern: ws + "/files/{path...}", access: wsWrite, body: rawBody, mount: true, long: true, h: s.writeFile},
		{method: "DELETE", pattern: ws + "/files/{path...}", access: wsWrite, mount: true, h: s.removeFile},
		{method: "GET", pattern: ws + "/tar/{path...}", access: wsRead, mount: true, long: true, h: s.downloadTar},
		{method: "PUT", pattern: ws + "/tar/{path...}", access: wsWrite, body: rawBody, mount: true, long: true, h: s.uploadTar},
		{method: "GET", pattern: ws + "/fs/stat", access: wsRead, mount: true, h: s.stat},
		{method: "GET", pattern: ws + "/fs/exists", access: wsRead, mount: true, h: s.exists},
		{method: "GET", pattern: ws + "/fs/list", access: wsRead, mount: true, h: s.list},
		{method: "POST", pattern: ws + "/fs/mkdir", access: wsWrite, body: jsonBody, mount: true, h: s.mkdir},
		{method: "POST", pattern: ws + "/fs/edit", access: wsWrite, body: jsonBody, mount: true, h: s.edit},
		{method: "POST", pattern: ws + "/fs/rename", access: wsWrite, body: jsonBody, mount: true, h: s.rename},
		{method: "POST", pattern: ws + "/fs/copy", access: wsWrite, body: jsonBody, mount: true, h: s.copy},
		{method: "POST", pattern: ws + "/fs/glob", access: wsRead, body: jsonBody, mount: true, h: s.glob},
		{method: "POST", pattern: ws + "/fs/grep", access: wsRead, body: jsonBody, mount: true, h: s.grep},

		{method: "POST", pattern: ws + "/snapshots", access: wsWrite, body: jsonBody, mount: true, long: true, h: s.saveSnapshot},
		{method: "GET", pattern: ws + "/snapshots", access: wsRead, mount: true, long: true, h: s.listSnapshots},
		{method: "DELETE", pattern: ws + "/snapshots/{snap}", access: wsWrite, mount: true, h: s.deleteSnapshot},
		{method: "POST", pattern: ws + "/snapshots/{snap}/restore", access: wsWrite, body: jsonBody, mount: true, long: true, h: s.restoreSnapshot},
		{method: "POST", pattern: ws + "/diff", access: wsRead, body: jsonBody, mount: true, long: true, h: s.diff},
		{method: "POST", pattern: ws + "/fork", access: adminOnly, body: jsonBody, long: true, h: s.fork},
		{method: "GET", pattern: ws + "/branches", access: wsRead, mount: true, h: s.branches},
		{method: "POST", pattern: ws + "/virtual/diff", access: wsRead, body: jsonBody, mount: true, long: true, h: s.virtualDiff},
		{method: "POST", pattern: ws + "/virtual/commit", access: wsWrite, body: jsonBody, mount: true, long: true, h: s.virtualCommit},
		{method: "POST", pattern: ws + "/virtual/discard", access: wsWrite, body: jsonBody, mount: true, long: true, h: s.virtualDiscard},
		{method: "GET", pattern: ws + "/changes", access: wsRead, long: true, h: s.changes},
	}
}

// register puts the routes, the MCP handler and the fallback on the mux.
func (s *Server) register(reg *prometheus.Registry) {
	s.routes = s.routeTable()
	s.metricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	for i := range s.routes {
		rt := &s.routes[i]
		s.mux.Handle(rt.method+" "+rt.pattern, s.wrap(rt))
	}
	if !s.opts.NoMCP {
		s.mcp = mcp.NewHandler(s.resolveMCP, mcp.Options{Version: s.opts.Version, Logger: s.log})
		h := s.wrap(&route{pattern: "/mcp", access: anyToken, body: jsonBody, long: true})
		s.mux.Handle("/mcp", h)
		s.mux.Handle("/mcp/{name}", h)
	}
	s.mux.Handle("/", s.wrap(&route{pattern: "/", access: public, h: func(c *call) error {
		return apierr.New(apierr.NotFound, "no route %s %s (see GET /v1/openapi.json)", c.r.Method, c.r.URL.Path)
	}}))
}

// Routes lists the routes as "METHOD PATTERN" with OpenAPI's path syntax,
// for the test that compares them with the document. /mcp is not listed:
// it is the MCP endpoint, not part of the HTTP API.
func (s *Server) Routes() []string {
	out := make([]string, len(s.routes))
	for i, rt := range s.routes {
		out[i] = rt.method + " " + strings.ReplaceAll(rt.pattern, "...}", "}")
	}
	return out
}

// wrap turns a route into an http.Handler: deadline, body cap,
// authentication and authorization, the workspace pin, the error body and
// the metrics.
func (s *Server) wrap(rt *route) http.Handler {
	label := rt.method + " " + rt.pattern
	if rt.method == "" {
		label = rt.pattern
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rw := &statusWriter{ResponseWriter: w}
		defer func() { s.metrics.observe(label, rw.status, time.Since(start)) }()
		ctx := r.Context()
		if !rt.long {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, s.opts.RequestTimeout)
			defer cancel()
			// A client that reads slowly cannot hold the handler past the
			// deadline (plus the time to say so).
			_ = http.NewResponseController(w).SetWriteDeadline(start.Add(s.opts.RequestTimeout + 10*time.Second))
		}
		switch rt.body {
		case jsonBody:
			r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxJSONBytes)
		case rawBody:
			r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
		default:
			r.Body = http.MaxBytesReader(w, r.Body, 0)
		}
		r = r.WithContext(ctx)
		c := &call{w: rw, r: r}
		if err := s.serve(rt, c); err != nil {
			s.fail(c, err)
		}
	})
}

// serve authorizes c and runs the route's handler.
func (s *Server) serve(rt *route, c *call) error {
	if rt.access != public {
		caller, err := s.authenticate(c.r)
		if err != nil {
			return err
		}
		c.caller = caller
		if err := authorize(rt.access, caller, c.r.PathValue("name")); err != nil {
			return err
		}
	}
	if rt.method == "" && rt.pattern == "/mcp" {
		s.mcp.ServeHTTP(c.w, c.r.WithContext(withCaller(c.r.Context(), c.caller)))
		return nil
	}
	if rt.mount {
		h, err := s.mgr.Acquire(c.r.Context(), c.r.PathValue("name"))
		if err != nil {
			return err
		}
		c.ws = h
		defer func() {
			if !c.held {
				h.Release()
			}
		}()
	}
	return rt.h(c)
}

// statusWriter remembers the status written, for the metrics and for fail.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends what was written so far (streaming responses).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// fail writes err as the error body, unless a response was already
// started (then the connection is all that is left to tell the client).
func (s *Server) fail(c *call, err error) {
	e := apierr.From(err, c.path)
	if e.Code == apierr.Internal || e.Code == apierr.Unavailable {
		s.log.Warn("request failed", "method", c.r.Method, "path", c.r.URL.Path, "code", e.Code, "err", err)
	}
	if sw, ok := c.w.(*statusWriter); ok && sw.status != 0 {
		return
	}
	if e.Code == apierr.Busy {
		c.w.Header().Set("Retry-After", "1")
	}
	if e.Code == apierr.Unauthorized {
		c.w.Header().Set("WWW-Authenticate", `Bearer realm="agentfs"`)
	}
	apierr.Write(c.w, e)
}

// writeJSON writes v as the response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads the JSON request body into v: unknown fields, trailing
// data and a body over the cap are errors (invalid_argument, too_large).
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return apierr.New(apierr.TooLarge, "request body over %d bytes", mbe.Limit)
		}
		if errors.Is(err, io.EOF) {
			return apierr.New(apierr.InvalidArgument, "empty request body: a JSON object is expected")
		}
		return apierr.New(apierr.InvalidArgument, "request body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apierr.New(apierr.InvalidArgument, "request body: data after the JSON object")
	}
	return nil
}

// healthz answers GET /healthz: the daemon is up.
func (s *Server) healthz(c *call) error {
	writeJSON(c.w, http.StatusOK, api.Health{Status: "ok", Version: s.opts.Version})
	return nil
}

// serveMetrics answers GET /metrics in Prometheus' text format.
func (s *Server) serveMetrics(c *call) error {
	s.metricsHandler.ServeHTTP(c.w, c.r)
	return nil
}

// invalid is an invalid_argument error.
func invalid(format string, args ...any) error {
	return apierr.New(apierr.InvalidArgument, format, args...)
}

// deadline bounds a long route: its context ends after RequestTimeout
// plus extra, and so does the time a client may take to read the answer.
func (s *Server) deadline(c *call, extra time.Duration) (context.Context, context.CancelFunc) {
	d := s.opts.RequestTimeout + extra
	_ = http.NewResponseController(c.w).SetWriteDeadline(time.Now().Add(d + 10*time.Second))
	return context.WithTimeout(c.r.Context(), d)
}

// jsonLine is v as one line of JSON, newline included.
func jsonLine(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// resolveMCP picks the workspace of a request to /mcp: the one a
// workspace token is scoped to (/mcp or /mcp/NAME), or the one the admin
// names (/mcp/NAME). Tools that write are refused for a read-only token;
// commands count against the same caps as the HTTP API's.
func (s *Server) resolveMCP(r *http.Request) (mcp.Workspace, error) {
	c, _ := CallerOf(r.Context())
	name := r.PathValue("name")
	if name == "" {
		name = c.Workspace
	}
	if name == "" {
		return nil, invalid("the admin token names the workspace in the URL: /mcp/NAME")
	}
	if err := authorize(wsRead, c, name); err != nil {
		return nil, err
	}
	return mcp.Managed{Manager: s.mgr, Name: name, ReadOnly: c.ReadOnly,
		Admit: func(job bool) (func(), error) { return s.limits.acquire(name, job) }}, nil
}
