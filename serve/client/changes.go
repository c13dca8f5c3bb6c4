package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/agentfs/agentfs/serve/api"
)

// ChangesOptions are the options of Workspace.Changes.
type ChangesOptions struct {
	// Path keeps the events at or below this workspace path (and the
	// creations and deletions of its ancestors); "" for all.
	Path string
	// Since resumes after the event with this ID ("" starts live).
	Since string
}

// ChangeStream is an open change feed (Workspace.Changes). Next must not
// be called concurrently; Close may be called from any goroutine and
// makes a waiting Next return.
type ChangeStream struct {
	body   io.ReadCloser
	sc     *bufio.Scanner
	end    string
	lastID string
}

// Changes calls GET .../changes and returns the open stream of the
// workspace's changes (server-sent events). It returns once the daemon
// subscribed: changes made after it returns are all reported. Cancelling
// ctx closes the stream.
func (w *Workspace) Changes(ctx context.Context, opts ChangesOptions) (*ChangeStream, error) {
	q := url.Values{}
	if opts.Path != "" {
		q.Set("path", opts.Path)
	}
	if opts.Since != "" {
		q.Set("since", opts.Since)
	}
	resp, err := w.c.do(ctx, request{method: "GET", path: w.base + "/changes", query: q}) //nolint:bodyclose // the ChangeStream closes it
	if err != nil {
		return nil, err
	}
	return newChangeStream(resp.Body), nil
}

// newChangeStream reads the events of body, which the stream closes.
func newChangeStream(body io.ReadCloser) *ChangeStream {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &ChangeStream{body: body, sc: sc}
}

// Next returns the next change, waiting for it. A reset (events may have
// been missed) is returned as an event with Op "reset" and its Reason.
// After the daemon's end event it returns io.EOF (EndReason says why); a
// stream that breaks without one returns another error (resume with
// Changes and Since: LastID()).
func (s *ChangeStream) Next() (api.ChangeEvent, error) {
	if s.end != "" {
		return api.ChangeEvent{}, io.EOF
	}
	var id, kind, data string
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if data == "" {
				id, kind = "", ""
				continue
			}
			return s.dispatch(id, kind, data)
		case strings.HasPrefix(line, ":"):
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				id = value
			case "event":
				kind = value
			case "data":
				data += value
			}
		}
	}
	err := s.sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return api.ChangeEvent{}, fmt.Errorf("agentfs serve: change feed broke: %w", err)
}

// dispatch decodes one event.
func (s *ChangeStream) dispatch(id, kind, data string) (api.ChangeEvent, error) {
	if kind == "end" {
		var e api.ChangeEnd
		if err := json.Unmarshal([]byte(data), &e); err != nil || e.Reason == "" {
			e.Reason = "unknown"
		}
		s.end = e.Reason
		return api.ChangeEvent{}, io.EOF
	}
	var ev api.ChangeEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return api.ChangeEvent{}, fmt.Errorf("agentfs serve: change feed: %s event: %w", kind, err)
	}
	if id != "" {
		s.lastID = id
	}
	return ev, nil
}

// EndReason is the reason of the daemon's end event ("deleted",
// "expired", "shutdown", ...), or "" before it.
func (s *ChangeStream) EndReason() string { return s.end }

// LastID is the ID of the last event returned, to resume from.
func (s *ChangeStream) LastID() string { return s.lastID }

// Close ends the stream.
func (s *ChangeStream) Close() error { return s.body.Close() }
