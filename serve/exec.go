package serve

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/apierr"
)

const (
	encUTF8   = api.EncodingUTF8
	encBase64 = api.EncodingBase64
)

// execRequest is api.ExecRequest with its validation.
type execRequest api.ExecRequest

// toExec validates req and turns it into an exec.Request.
func (req *execRequest) toExec() (exec.Request, error) {
	switch req.Encoding {
	case "":
		req.Encoding = encUTF8
	case encUTF8, encBase64:
	default:
		return exec.Request{}, invalid("encoding %q: \"utf-8\" or \"base64\"", req.Encoding)
	}
	if (req.Command == "") == (len(req.Argv) == 0) {
		return exec.Request{}, invalid("set exactly one of command (a shell line) and argv (a program and its arguments)")
	}
	if req.Timeout < 0 {
		return exec.Request{}, invalid("timeout %v: seconds, more than 0 (absent: %v)", req.Timeout, DefaultExecTimeout.Seconds())
	}
	// Compared in seconds: a huge value would overflow a Duration.
	if req.Timeout > MaxExecTimeout.Seconds() {
		return exec.Request{}, invalid("timeout %v s: at most %v s; start a job for longer work", req.Timeout, MaxExecTimeout.Seconds())
	}
	timeout := DefaultExecTimeout
	if req.Timeout > 0 {
		timeout = time.Duration(req.Timeout * float64(time.Second))
	}
	if req.OutputLimit < 0 {
		return exec.Request{}, invalid("output_limit %d: bytes, more than 0", req.OutputLimit)
	}
	out := exec.Request{Command: req.Command, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, Timeout: timeout, OutputLimit: req.OutputLimit}
	if req.Stdin != "" {
		in := []byte(req.Stdin)
		if req.Encoding == encBase64 {
			var err error
			if in, err = base64.StdEncoding.DecodeString(req.Stdin); err != nil {
				return exec.Request{}, invalid("stdin: not base64: %v", err)
			}
		}
		out.Stdin = strings.NewReader(string(in))
	}
	return out, nil
}

// encode renders output bytes in enc.
func encode(b []byte, enc string) string {
	if enc == encBase64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func newExecResult(res *exec.Result, enc string) *api.ExecResult {
	var ch *api.Changes
	if res.Changes != nil {
		ch = &api.Changes{Created: res.Changes.Created, Modified: res.Changes.Modified, Deleted: res.Changes.Deleted}
	}
	return &api.ExecResult{
		ExitCode: res.ExitCode, Stdout: encode(res.Stdout, enc), Stderr: encode(res.Stderr, enc),
		Output: encode(res.Merged, enc), Encoding: enc, TimedOut: res.TimedOut, Truncated: res.Truncated,
		DurationMS: res.Duration.Milliseconds(), Changes: ch,
	}
}

// execError decides what an error of Exec (or Job.Wait) that came with a
// Result means for the client: a failed change list leaves the result
// valid (changes null); anything else (a failed sync barrier: the
// command's writes may not be durable) fails the request.
func execError(err error) error {
	if err == nil || errors.Is(err, exec.ErrChanges) && !errors.Is(err, exec.ErrSync) {
		return nil
	}
	return err
}

// command reads the request of a command (exec, stream or job), takes
// its slot under the caps and returns the backend to run it with; the
// caller must call release once the command has ended.
func (s *Server) command(c *call, job bool) (req execRequest, er exec.Request, b *exec.Backend, release func(), err error) {
	if err = decode(c.r, &req); err != nil {
		return req, er, nil, nil, err
	}
	c.path = req.Cwd
	if er, err = req.toExec(); err != nil {
		return req, er, nil, nil, err
	}
	if job && req.Timeout == 0 {
		// A job runs until it ends or is killed unless a timeout is given.
		er.Timeout = -1
	}
	if req.Backend != nil && !c.caller.Admin {
		return req, er, nil, nil, apierr.New(apierr.Forbidden, "backend: only the admin token may choose a command's backend; a workspace token runs commands with its workspace's")
	}
	if release, err = s.limits.acquire(c.ws.Name, job); err != nil {
		return req, er, nil, nil, err
	}
	if req.Backend == nil {
		return req, er, c.ws.Backend, release, nil
	}
	// The same fields as exec.Spec: a change to one fails to compile here.
	h, slot := c.ws, release
	b, err = h.NewBackend(c.r.Context(), exec.Spec(*req.Backend))
	if err != nil {
		slot()
		return req, er, nil, nil, err
	}
	return req, er, b, func() {
		if err := h.CloseBackend(b); err != nil {
			s.log.Warn("closing a command's backend", "workspace", h.Name, "err", err)
		}
		slot()
	}, nil
}

// exec answers POST /v1/workspaces/{name}/exec: it runs the command and
// returns its result once its whole process tree is gone and what it
// wrote is synced.
func (s *Server) exec(c *call) error {
	req, er, b, release, err := s.command(c, false)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := s.deadline(c, er.Timeout)
	defer cancel()
	res, err := b.Exec(ctx, er)
	if res == nil || execError(err) != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, newExecResult(res, req.Encoding))
	return nil
}

// streamEvent is one line of POST .../exec/stream; its error is written
// by apierr (same JSON as api.Error).
type streamEvent struct {
	Type   string          `json:"type"`
	Data   string          `json:"data,omitempty"`
	Result *api.ExecResult `json:"result,omitempty"`
	Error  *apierr.Error   `json:"error,omitempty"`
}

// ndjson writes stream events, one JSON object a line, flushing each.
// The response's header goes out with the first event, so that a
// command that cannot start fails with its own status.
type ndjson struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	enc     string
	started bool  // guarded by mu: the header was written
	err     error // guarded by mu: the first write error; later events are dropped
}

func (n *ndjson) send(ev streamEvent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.err != nil {
		return
	}
	if !n.started {
		n.started = true
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.Header().Set("X-Content-Type-Options", "nosniff")
		n.w.WriteHeader(http.StatusOK)
	}
	b, err := jsonLine(ev)
	if err == nil {
		_, err = n.w.Write(b)
	}
	if err == nil {
		err = n.rc.Flush()
	}
	n.err = err
}

// streamWriter sends a command's output on one stream as events.
type streamWriter struct {
	n    *ndjson
	kind string
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.n.send(streamEvent{Type: w.kind, Data: encode(p, w.n.enc)})
	return len(p), nil
}

// execStream answers POST /v1/workspaces/{name}/exec/stream: the output
// as NDJSON events as it comes, then the result.
func (s *Server) execStream(c *call) error {
	req, er, b, release, err := s.command(c, false)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := s.deadline(c, er.Timeout)
	defer cancel()
	n := &ndjson{w: c.w, rc: http.NewResponseController(c.w), enc: req.Encoding}
	// The output goes out as events only; the result carries none.
	er.Stdout, er.Stderr = streamWriter{n, "stdout"}, streamWriter{n, "stderr"}
	er.DiscardOutput = true
	res, err := b.Exec(ctx, er)
	if res == nil || execError(err) != nil {
		n.mu.Lock()
		started := n.started
		n.mu.Unlock()
		if !started {
			return err
		}
		n.send(streamEvent{Type: "error", Error: apierr.From(err, c.path)})
		return nil
	}
	n.send(streamEvent{Type: "result", Result: newExecResult(res, req.Encoding)})
	return nil
}
