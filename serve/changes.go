package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/changefeed"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/workspace"
)

// DefaultKeepalive is Options.Keepalive's default.
const DefaultKeepalive = 15 * time.Second

// sseWriteTimeout bounds each write of an event stream: a client that
// stops reading is dropped instead of holding the handler.
const sseWriteTimeout = 30 * time.Second

// endUnavailable is the end reason when a workspace whose mount server
// went away cannot be mounted again.
const endUnavailable = "unavailable"

// resetRemounted is the reset reason when the daemon subscribes again
// after the workspace's mount server went away by itself.
const resetRemounted = "remounted"

// changes answers GET /v1/workspaces/{name}/changes: the workspace's
// change feed as server-sent events, relayed from its mount's control
// socket (fs/control, fs/changefeed). The feed holds a Watch Handle, which
// keeps the workspace mounted without stopping its deletion; when the
// mount's feed ends, the Handle says why (deleted, expired, shutdown) and
// the stream ends with that reason, or, if the mount server just went
// away, the workspace is mounted again and the stream goes on after a
// reset.
func (s *Server) changes(c *call) error {
	q := c.r.URL.Query()
	opts := changefeed.Options{Since: q.Get("since"), Path: q.Get("path")}
	if opts.Since == "" {
		opts.Since = c.r.Header.Get("Last-Event-ID")
	}
	if opts.Since != "" {
		if _, _, err := changefeed.ParseID(opts.Since); err != nil {
			return invalid("since %q: not an event id (pass back an event's id as it came)", opts.Since)
		}
	}
	if opts.Path != "" {
		c.path = opts.Path
		if !filepath.IsLocal(opts.Path) {
			return fmt.Errorf("changes of %q: %w (the path must be relative to the workspace root, without \"..\")", opts.Path, exec.ErrPathEscape)
		}
		opts.Path = path.Clean(opts.Path)
		if opts.Path == "." {
			opts.Path = ""
		}
	}
	ctx := c.r.Context()
	name := c.r.PathValue("name")
	h, stream, err := s.watch(ctx, name, opts)
	if err != nil {
		return err
	}
	release := func() {
		if stream != nil {
			_ = stream.Close()
			h.Release()
		}
		h, stream = nil, nil
	}
	defer func() { release() }()
	sse := &sseWriter{w: c.w, rc: http.NewResponseController(c.w)}
	c.w.Header().Set("Content-Type", "text/event-stream")
	c.w.Header().Set("Cache-Control", "no-store")
	c.w.Header().Set("X-Accel-Buffering", "no")
	c.w.WriteHeader(http.StatusOK)
	if sse.flush() != nil {
		return nil
	}
	keepalive := time.NewTicker(s.opts.Keepalive)
	defer keepalive.Stop()
	for {
		events := relay(stream)
		for open := true; open; {
			var ev changefeed.Event
			select {
			case ev, open = <-events:
				if open && sse.change(ev) != nil {
					return nil
				}
			case <-keepalive.C:
				if sse.comment("keepalive") != nil {
					return nil
				}
			case <-s.base.Done():
				_ = sse.event("", "end", api.ChangeEnd{Reason: workspace.EndShutdown})
				return nil
			case <-ctx.Done():
				return nil // the client went away
			}
		}
		// The mount's feed ended: why?
		_ = stream.Close()
		if why := h.EndReason(); why != "" {
			_ = sse.event("", "end", api.ChangeEnd{Reason: why})
			return nil
		}
		// Its server went away by itself: mount it again and go on live.
		release()
		h, stream, err = s.rewatch(ctx, name, opts.Path)
		if err != nil {
			s.log.Warn("change feed: the workspace cannot be mounted again", "workspace", name, "err", err)
			_ = sse.event("", "end", api.ChangeEnd{Reason: endUnavailable})
			return nil
		}
		if sse.event("", "reset", api.ChangeEvent{Op: changefeed.OpReset, Reason: resetRemounted, Time: time.Now().UTC()}) != nil {
			return nil
		}
	}
}

// watch holds workspace name for a feed and subscribes to its mount's
// change feed.
func (s *Server) watch(ctx context.Context, name string, opts changefeed.Options) (*workspace.Handle, *control.ChangeStream, error) {
	h, err := s.mgr.Watch(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	stream, err := h.Control.Changes(ctx, opts)
	if err != nil {
		h.Release()
		return nil, nil, fmt.Errorf("change feed of workspace %s: %w", name, err)
	}
	return h, stream, nil
}

// rewatch is watch after the workspace's mount server went away by
// itself: the manager may not have noticed yet (it still offers the dead
// mount), so it tries again for a few seconds.
func (s *Server) rewatch(ctx context.Context, name, path string) (*workspace.Handle, *control.ChangeStream, error) {
	const attempts, pause = 20, 250 * time.Millisecond
	var err error
	for range attempts {
		var h *workspace.Handle
		var stream *control.ChangeStream
		if h, stream, err = s.watch(ctx, name, changefeed.Options{Path: path}); err == nil {
			return h, stream, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(pause):
		}
	}
	return nil, nil, err
}

// relay reads stream's events into a channel, closed when the stream
// ends (the mount's feed closed, its server went away, or the stream was
// closed). The channel's buffer is small: the mount's ring is the
// subscriber's buffer (a slow client falls behind there, and gets a
// reset), so the daemon holds few events per client.
func relay(stream *control.ChangeStream) <-chan changefeed.Event {
	ch := make(chan changefeed.Event, 16)
	go func() {
		defer close(ch)
		for {
			ev, err := stream.Next()
			if err != nil {
				return
			}
			ch <- ev
		}
	}()
	return ch
}

func newChangeEvent(ev changefeed.Event) api.ChangeEvent {
	return api.ChangeEvent{ID: ev.ID, Op: ev.Op, Path: ev.Path, Type: ev.Type, Time: ev.Time, Reason: ev.Reason}
}

// sseWriter writes server-sent events, each write bounded by
// sseWriteTimeout.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// event writes one event (id may be "") with v as its JSON data.
func (s *sseWriter) event(id, kind string, v any) error {
	data, err := jsonLine(v)
	if err != nil {
		return err
	}
	var b []byte
	if id != "" {
		b = append(append(append(b, "id: "...), id...), '\n')
	}
	b = append(append(append(b, "event: "...), kind...), '\n')
	b = append(append(append(b, "data: "...), data...), '\n') // data ends with its newline
	return s.write(b)
}

// change writes a change or reset of the mount's feed.
func (s *sseWriter) change(ev changefeed.Event) error {
	kind := "change"
	if ev.Op == changefeed.OpReset {
		kind = "reset"
	}
	return s.event(ev.ID, kind, newChangeEvent(ev))
}

// comment writes an SSE comment line (clients ignore it).
func (s *sseWriter) comment(text string) error { return s.write([]byte(": " + text + "\n\n")) }

func (s *sseWriter) write(b []byte) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	err := s.rc.Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}
