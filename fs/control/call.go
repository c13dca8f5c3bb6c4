package control

// The registry of calls: every request of the control socket is a Call
// (one answer) or a StreamCall (events, then one answer), declared once
// with its name, request and answer types and its handler. The server
// answers every registered call the same way (one decoder, one error
// answer, one stream writer) and the client makes every call through Do or
// DoStream. Adding an operation is declaring its call, next to its
// handler, and using it from its command.
//
// On the wire a call is POST /v1/NAME with its request as a JSON body
// (empty: the zero request). A Call answers 200 with its answer as JSON; a
// StreamCall answers 200 with one JSON object per line, {"event": ...}
// any number of times, then {"result": ...} or {"error": ...}. A failed
// call answers with the HTTP status of its error's code and
// {"error": MESSAGE, "code": NAME}, where NAME names the sentinel the
// error matched in Errors; the client's error then matches that same
// sentinel with errors.Is.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentfs/agentfs/internal/errcode"
)

// Errors is the control socket's error table: its own sentinels ahead of
// those of every layer below (errcode.Below; not the context errors: a
// deadline or cancellation in the server is the server's own, which must
// not look like the client's). serve/apierr extends it with the daemon's.
var Errors = errcode.Join(errcode.Table{
	{Name: "fs/control.ErrNotMount", Err: ErrNotMount, Code: errcode.Unavailable},
	{Name: "fs/control.ErrNotRunning", Err: ErrNotRunning, Code: errcode.Unavailable},
	{Name: "fs/control.ErrNoHistory", Err: ErrNoHistory, Code: errcode.Unavailable},
	{Name: "fs/control.ErrNoChanges", Err: ErrNoChanges, Code: errcode.Unavailable},
	{Name: "fs/control.ErrBadRequest", Err: ErrBadRequest, Code: errcode.InvalidArgument},
}, errcode.Below)

// ErrBadRequest: the server could not read a request (a malformed body,
// a missing field).
var ErrBadRequest = errors.New("bad control request")

// maxRequest bounds a request's body; maxReply a (non-streamed) answer.
const (
	maxRequest = 16 << 20
	maxReply   = 16 << 20
)

// A Call is one request of the control socket, with request type Req and
// answer type Resp. Calls are declared with newCall, which registers their
// handler; use them with Do.
type Call[Req, Resp any] struct{ name string }

// Name is the call's name, its path under /v1/.
func (c Call[Req, Resp]) Name() string { return c.name }

// A StreamCall is a request whose answer is a stream of events of type Ev
// and then one answer of type Resp. Declared with newStreamCall; use it
// with DoStream.
type StreamCall[Req, Ev, Resp any] struct{ name string }

// Name is the call's name, its path under /v1/.
func (c StreamCall[Req, Ev, Resp]) Name() string { return c.name }

// registry maps every call's name to what answers it.
var registry = map[string]func(*Server) http.HandlerFunc{}

func register(name string, h func(*Server) http.HandlerFunc) {
	if _, dup := registry[name]; dup {
		panic("control: call " + name + " declared twice")
	}
	registry[name] = h
}

// newCall declares the call name, answered by handle.
func newCall[Req, Resp any](name string, handle func(ctx context.Context, s *Server, req Req) (Resp, error)) Call[Req, Resp] {
	register(name, func(s *Server) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req Req
			if err := decodeRequest(r, &req); err != nil {
				s.fail(w, name, err)
				return
			}
			resp, err := handle(r.Context(), s, req)
			if err != nil {
				s.fail(w, name, err)
				return
			}
			writeJSON(w, http.StatusOK, resp)
		}
	})
	return Call[Req, Resp]{name}
}

// newStreamCall declares the streamed call name, answered by handle,
// which sends its events through ev. An error handle returns before the
// stream is open (ev.Open, or the first ev.Send) is answered as a Call's
// error; after, as the stream's last line.
func newStreamCall[Req, Ev, Resp any](name string,
	handle func(ctx context.Context, s *Server, req Req, ev *Events[Ev]) (Resp, error)) StreamCall[Req, Ev, Resp] {
	register(name, func(s *Server) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req Req
			if err := decodeRequest(r, &req); err != nil {
				s.fail(w, name, err)
				return
			}
			ev := &Events[Ev]{w: w}
			resp, err := handle(r.Context(), s, req, ev)
			switch {
			case err != nil && ev.st == nil:
				s.fail(w, name, err)
			case err != nil:
				s.log.Debug("control request failed", "op", name, "err", err)
				_ = ev.st.send(streamLine{Error: replyOf(err)})
			case ev.Open() == nil:
				_ = ev.st.send(streamLine{Result: resp})
			}
		}
	})
	return StreamCall[Req, Ev, Resp]{name}
}

// Events is how a StreamCall's handler streams its answer. Its methods
// are called from the handler's goroutine.
type Events[Ev any] struct {
	w  http.ResponseWriter
	st *stream // nil until Open
}

// Open sends the answer's header: the client's OpenStream returns then.
// Send opens the stream if need be; a handler calls Open itself when the
// client must know that something is ready before the first event (the
// change feed's subscription).
func (e *Events[Ev]) Open() error {
	if e.st == nil {
		e.st = newStream(e.w)
		e.st.flush()
	}
	return e.st.err
}

// Send sends one event; an error means the client went away.
func (e *Events[Ev]) Send(ev Ev) error {
	if err := e.Open(); err != nil {
		return err
	}
	return e.st.send(streamLine{Event: ev})
}

// decodeRequest reads a JSON request body into v; an empty body leaves v
// as is.
func decodeRequest(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRequest+1))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if len(b) > maxRequest {
		return fmt.Errorf("%w: the request is over %d bytes", ErrBadRequest, maxRequest)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return nil
}

// errorReply is the body of a failed call, and a stream's error line.
type errorReply struct {
	Error string `json:"error"`
	// Code is the Errors entry the error matched ("" for none).
	Code string `json:"code,omitempty"`
}

// replyOf is err as the server answers it.
func replyOf(err error) *errorReply {
	rep := &errorReply{Error: err.Error()}
	if e, ok := Errors.Lookup(err); ok {
		rep.Code = e.Name
	}
	return rep
}

// fail answers a failed call with the status of its error's code.
func (s *Server) fail(w http.ResponseWriter, op string, err error) {
	rep := replyOf(err)
	status := http.StatusInternalServerError
	if e, ok := Errors.ByName(rep.Code); ok {
		status = e.Code.Status()
	}
	s.log.Debug("control request failed", "op", op, "err", err)
	writeJSON(w, status, rep)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// remoteError is an error the server reported: its text, and the sentinel
// its code names (nil for none).
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// err rebuilds the server's error. A server of an earlier version may
// send a name an entry had then: Decode understands those too.
func (e errorReply) err() error {
	var kind error
	if ent, ok := Errors.Decode(e.Code); ok {
		kind = ent.Err
	}
	return &remoteError{msg: e.Error, kind: kind}
}

// streamLine is one line of a streamed answer.
type streamLine struct {
	Event  any         `json:"event,omitempty"`
	Result any         `json:"result,omitempty"`
	Error  *errorReply `json:"error,omitempty"`
}

// stream writes a streamed answer, one goroutine at a time.
type stream struct {
	enc   *json.Encoder
	flush func()
	err   error // the first write error: the client went away
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	st := &stream{enc: json.NewEncoder(w), flush: func() {}}
	if f, ok := w.(http.Flusher); ok {
		st.flush = f.Flush
	}
	return st
}

// send writes one line and flushes it to the client.
func (st *stream) send(l streamLine) error {
	if st.err != nil {
		return st.err
	}
	if st.err = st.enc.Encode(l); st.err == nil {
		st.flush()
	}
	return st.err
}

// Do makes call with req on the mount c talks to and returns its answer,
// or the server's error (matching the sentinel it matched there).
func Do[Req, Resp any](ctx context.Context, c *Client, call Call[Req, Resp], req Req) (Resp, error) {
	var out Resp
	resp, err := c.post(ctx, call.name, req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return out, fmt.Errorf("control socket %s: %s: %w", c.socket, call.name, err)
	}
	if err := json.Unmarshal(reply, &out); err != nil {
		return out, fmt.Errorf("control socket %s: bad reply to %s: %w", c.socket, call.name, err)
	}
	return out, nil
}

// DoStream makes call with req, passes each event to fn as it comes, and
// returns the answer. An error from fn ends the call (and the server's
// work) and is returned.
func DoStream[Req, Ev, Resp any](ctx context.Context, c *Client, call StreamCall[Req, Ev, Resp], req Req, fn func(Ev) error) (Resp, error) {
	var zero Resp
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // an error from fn ends the request, and the server's work
	st, err := OpenStream(ctx, c, call, req)
	if err != nil {
		return zero, err
	}
	defer func() { _ = st.Close() }()
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			return st.Result(), nil
		}
		if err != nil {
			return zero, err
		}
		if err := fn(ev); err != nil {
			return zero, err
		}
	}
}

// Stream is an open answer of a StreamCall (OpenStream). Next is called
// from one goroutine; Close may be called from any.
type Stream[Ev, Resp any] struct {
	name   string
	socket string
	body   io.ReadCloser
	sc     *bufio.Scanner
	result Resp
}

// OpenStream makes call with req and returns once the server opened its
// answer (for the change feed: once the subscription exists). The call
// lasts as long as ctx allows; the caller closes the Stream.
func OpenStream[Req, Ev, Resp any](ctx context.Context, c *Client, call StreamCall[Req, Ev, Resp], req Req) (*Stream[Ev, Resp], error) {
	resp, err := c.post(ctx, call.name, req) //nolint:bodyclose // the Stream owns the body: its Close closes it
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	return &Stream[Ev, Resp]{name: call.name, socket: c.socket, body: resp.Body, sc: sc}, nil
}

// Next returns the next event, waiting for it. At the end of the answer
// it returns io.EOF, and Result the answer; a failed call returns the
// server's error (matching the sentinel it matched there).
func (s *Stream[Ev, Resp]) Next() (Ev, error) {
	var ev Ev
	if !s.sc.Scan() {
		if err := s.sc.Err(); err != nil {
			return ev, fmt.Errorf("control socket %s: %s: %w", s.socket, s.name, err)
		}
		return ev, fmt.Errorf("control socket %s: %s: the server ended the answer without a result (did the mount stop?)", s.socket, s.name)
	}
	var l struct {
		Event  json.RawMessage `json:"event"`
		Result json.RawMessage `json:"result"`
		Error  *errorReply     `json:"error"`
	}
	if err := json.Unmarshal(s.sc.Bytes(), &l); err != nil {
		return ev, fmt.Errorf("control socket %s: bad reply to %s: %w", s.socket, s.name, err)
	}
	switch {
	case l.Error != nil:
		return ev, l.Error.err()
	case l.Result != nil:
		if err := json.Unmarshal(l.Result, &s.result); err != nil {
			return ev, fmt.Errorf("control socket %s: bad result of %s: %w", s.socket, s.name, err)
		}
		return ev, io.EOF
	case l.Event != nil:
		if err := json.Unmarshal(l.Event, &ev); err != nil {
			return ev, fmt.Errorf("control socket %s: bad event of %s: %w", s.socket, s.name, err)
		}
		return ev, nil
	}
	return ev, fmt.Errorf("control socket %s: bad reply to %s: a line with no event, result or error", s.socket, s.name)
}

// Result is the call's answer, once Next returned io.EOF.
func (s *Stream[Ev, Resp]) Result() Resp { return s.result }

// Close ends the call; a Next waiting in another goroutine returns an
// error.
func (s *Stream[Ev, Resp]) Close() error { return s.body.Close() }

// post sends a call's request and returns the server's 200 answer (the
// caller closes its body), or the error the server answered.
func (c *Client) post(ctx context.Context, name string, req any) (*http.Response, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agentfs/v1/"+name, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", c.socket, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	var e errorReply
	if json.Unmarshal(reply, &e) != nil || e.Error == "" {
		return nil, fmt.Errorf("control socket %s: %s: HTTP %d: %s", c.socket, name, resp.StatusCode,
			strings.TrimSpace(string(reply)))
	}
	return nil, e.err()
}
