package control

// The change feed of a mount (fs.Server.Changes) over the control socket:
// GET /v1/changes?since=ID&path=P answers with a stream of JSON lines,
// {"event": {...}} for each change or reset (changefeed.Event), and a last
// {"end": "REASON"} when the mount is gone. The subscription exists before
// the response's header is sent: once Client.Changes returns, no change is
// missed.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/agentfs/agentfs/fs/changefeed"
)

// ChangeSource is what a Backend implements to serve its mount's change
// feed; for any other Backend the request is answered 501.
type ChangeSource interface {
	// Changes returns the mount's feed (fs.Server.Changes).
	Changes() *changefeed.Feed
}

// ErrNoChanges: the mount's server does not serve a change feed.
var ErrNoChanges = errors.New("this mount does not serve a change feed")

// changeLine is one line of the stream.
type changeLine struct {
	Event *changefeed.Event `json:"event,omitempty"`
	End   string            `json:"end,omitempty"`
}

// handleChanges streams the feed until the client goes or the feed closes.
func (s *Server) handleChanges(w http.ResponseWriter, r *http.Request) {
	src, ok := s.b.(ChangeSource)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, errorReply{Error: ErrNoChanges.Error()})
		return
	}
	q := r.URL.Query()
	sub, err := src.Changes().Subscribe(changefeed.Options{Since: q.Get("since"), Path: q.Get("path")})
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorReply{Error: "changes: " + err.Error()})
		return
	}
	defer sub.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	enc := json.NewEncoder(w)
	for {
		ev, err := sub.Next(r.Context())
		var line changeLine
		switch {
		case errors.Is(err, changefeed.ErrClosed):
			line.End = "unmounted"
		case err != nil:
			return // the client went away
		default:
			line.Event = &ev
		}
		if enc.Encode(line) != nil || rc.Flush() != nil || line.End != "" {
			return
		}
	}
}

// ChangeStream is an open change feed of a mount (Client.Changes). Next
// and Close may be called from different goroutines.
type ChangeStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// Changes subscribes to the mount's change feed with opts (resume after
// opts.Since, only opts.Path and below). It returns once the subscription
// exists. A malformed opts.Since is an error matching changefeed.ErrBadID;
// a server without a feed, ErrNoChanges.
func (c *Client) Changes(ctx context.Context, opts changefeed.Options) (*ChangeStream, error) {
	if opts.Since != "" {
		if _, _, err := changefeed.ParseID(opts.Since); err != nil {
			return nil, err
		}
	}
	q := url.Values{}
	if opts.Since != "" {
		q.Set("since", opts.Since)
	}
	if opts.Path != "" {
		q.Set("path", opts.Path)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agentfs/v1/changes?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", c.socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e errorReply
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		if resp.StatusCode == http.StatusNotImplemented {
			return nil, fmt.Errorf("control socket %s: %w", c.socket, ErrNoChanges)
		}
		return nil, fmt.Errorf("control socket %s: changes: HTTP %d: %s", c.socket, resp.StatusCode, e.Error)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &ChangeStream{body: resp.Body, sc: sc}, nil
}

// Next returns the next event, waiting for it. When the mount is gone it
// returns an error matching changefeed.ErrClosed; when the connection
// breaks (the server died) or the stream was closed, another error.
func (s *ChangeStream) Next() (changefeed.Event, error) {
	if !s.sc.Scan() {
		err := s.sc.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return changefeed.Event{}, fmt.Errorf("change feed: %w", err)
	}
	var line changeLine
	if err := json.Unmarshal(s.sc.Bytes(), &line); err != nil {
		return changefeed.Event{}, fmt.Errorf("change feed: bad line: %w", err)
	}
	if line.Event == nil {
		return changefeed.Event{}, fmt.Errorf("%w: %s", changefeed.ErrClosed, line.End)
	}
	return *line.Event, nil
}

// Close ends the subscription; a Next waiting in another goroutine
// returns an error.
func (s *ChangeStream) Close() error { return s.body.Close() }
