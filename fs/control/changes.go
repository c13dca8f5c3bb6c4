package control

// The change feed of a mount (fs.Server.Changes) over the control socket:
// ChangesCall, a StreamCall whose events are changefeed.Events and whose
// result, when the mount is gone, says so. The subscription exists before
// the answer opens: once Client.Changes returns, no change is missed.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/agentfs/agentfs/fs/changefeed"
)

// ChangeSource is what a Backend implements to serve its mount's change
// feed; for any other Backend the call fails with ErrNoChanges.
type ChangeSource interface {
	// Changes returns the mount's feed (fs.Server.Changes).
	Changes() *changefeed.Feed
}

// ErrNoChanges: the mount's server does not serve a change feed.
var ErrNoChanges = errors.New("this mount does not serve a change feed")

// ChangesRequest subscribes to a mount's change feed (changefeed.Options).
type ChangesRequest struct {
	Since string `json:"since,omitempty"`
	Path  string `json:"path,omitempty"`
}

// ChangesEnd ends a change feed: the mount is gone.
type ChangesEnd struct {
	Reason string `json:"end"`
}

// ChangesCall streams the mount's change feed: an event per change or
// reset, until the mount is gone (then its ChangesEnd) or the client
// goes. The answer opens once the subscription exists.
var ChangesCall = newStreamCall("changes", func(ctx context.Context, s *Server, req ChangesRequest, ev *Events[changefeed.Event]) (ChangesEnd, error) {
	src, ok := s.b.(ChangeSource)
	if !ok {
		return ChangesEnd{}, ErrNoChanges
	}
	sub, err := src.Changes().Subscribe(changefeed.Options{Since: req.Since, Path: req.Path})
	if err != nil {
		return ChangesEnd{}, fmt.Errorf("changes: %w", err)
	}
	defer sub.Close()
	if err := ev.Open(); err != nil {
		return ChangesEnd{}, err
	}
	for {
		e, err := sub.Next(ctx)
		if errors.Is(err, changefeed.ErrClosed) {
			return ChangesEnd{Reason: "unmounted"}, nil
		}
		if err != nil {
			return ChangesEnd{}, err // the client went away
		}
		if err := ev.Send(e); err != nil {
			return ChangesEnd{}, err
		}
	}
})

// ChangeStream is an open change feed of a mount (Client.Changes). Next
// and Close may be called from different goroutines.
type ChangeStream struct {
	s *Stream[changefeed.Event, ChangesEnd]
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
	s, err := OpenStream(ctx, c, ChangesCall, ChangesRequest{Since: opts.Since, Path: opts.Path})
	if err != nil {
		return nil, err
	}
	return &ChangeStream{s: s}, nil
}

// Next returns the next event, waiting for it. When the mount is gone it
// returns an error matching changefeed.ErrClosed; when the connection
// breaks (the server died) or the stream was closed, another error.
func (s *ChangeStream) Next() (changefeed.Event, error) {
	ev, err := s.s.Next()
	if errors.Is(err, io.EOF) {
		return changefeed.Event{}, fmt.Errorf("%w: %s", changefeed.ErrClosed, s.s.Result().Reason)
	}
	if err != nil {
		return changefeed.Event{}, fmt.Errorf("change feed: %w", err)
	}
	return ev, nil
}

// Close ends the subscription; a Next waiting in another goroutine
// returns an error.
func (s *ChangeStream) Close() error { return s.s.Close() }
