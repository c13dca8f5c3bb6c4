package serve_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/serve"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/client"
	"github.com/agentfs/agentfs/serve/workspace"
)

// feed reads a change stream in the background.
type feed struct {
	s   *client.ChangeStream
	ch  chan api.ChangeEvent
	err chan error // the error that ended it (io.EOF after end)
}

func openFeed(t *testing.T, w *client.Workspace, o client.ChangesOptions) *feed {
	t.Helper()
	s, err := w.Changes(ctxT(t), o)
	if err != nil {
		t.Fatalf("changes %+v: %v", o, err)
	}
	f := &feed{s: s, ch: make(chan api.ChangeEvent, 100000), err: make(chan error, 1)}
	go func() {
		for {
			ev, err := s.Next()
			if err != nil {
				f.err <- err
				close(f.ch)
				return
			}
			f.ch <- ev
		}
	}()
	t.Cleanup(func() { _ = s.Close() })
	return f
}

// show is an event as the tests compare them.
func show(ev api.ChangeEvent) string {
	if ev.Op == "reset" {
		return "reset " + ev.Reason
	}
	return ev.Op + " " + ev.Type + " " + ev.Path
}

// until returns the events up to the creation of file marker.
func (f *feed) until(t *testing.T, marker string) []api.ChangeEvent {
	t.Helper()
	var out []api.ChangeEvent
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-f.ch:
			if !ok {
				t.Fatalf("feed ended (%v) before %s", <-f.err, marker)
			}
			if ev.Op == "created" && ev.Path == marker {
				return out
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("no %s in the feed after %d events", marker, len(out))
		}
	}
}

// wantInOrder fails unless want is a subsequence of got.
func wantInOrder(t *testing.T, what string, got []api.ChangeEvent, want ...string) {
	t.Helper()
	var all []string
	i := 0
	for _, ev := range got {
		all = append(all, show(ev))
		if i < len(want) && show(ev) == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("%s: missing %q (and what follows) in\n\t%s", what, want[i], strings.Join(all, "\n\t"))
	}
}

// TestChangeFeed: the feed of a real workspace reports what commands and
// the file routes change, filters by path, resumes, resets on an unknown
// id and after a remount, holds the workspace mounted, and ends when the
// workspace is deleted or the daemon shuts down.
func TestChangeFeed(t *testing.T) {
	d := newDaemonConfig(t, func(c *workspace.Config) {
		c.IdleTimeout = time.Second
		c.ScanInterval = 100 * time.Millisecond
	}, func(o *serve.Options) { o.Keepalive = 200 * time.Millisecond })
	ctx := ctxT(t)
	w := d.create("w")
	all := openFeed(t, w, client.ChangesOptions{})
	src := openFeed(t, w, client.ChangesOptions{Path: "src"})
	step := 0
	marker := func() string {
		t.Helper()
		step++
		m := fmt.Sprintf("marker%d", step)
		if err := w.WriteFile(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		return m
	}

	// The file routes.
	if err := w.WriteFile(ctx, "src/a.txt", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := w.Rename(ctx, "src/a.txt", "src/b.txt"); err != nil {
		t.Fatal(err)
	}
	if err := w.Mkdir(ctx, "src/d", false); err != nil {
		t.Fatal(err)
	}
	if err := w.Remove(ctx, "src/b.txt", false); err != nil {
		t.Fatal(err)
	}
	m := marker()
	byRoutes := all.until(t, m)
	wantInOrder(t, "file routes", byRoutes, "created dir src", "created file src/a.txt", "modified file src/a.txt",
		"deleted file src/a.txt", "created file src/b.txt", "created dir src/d", "deleted file src/b.txt")
	ids := map[string]bool{}
	for _, ev := range byRoutes {
		if ev.ID == "" || ids[ev.ID] || ev.Time.IsZero() {
			t.Errorf("event %+v: an id (unique) and a time are required", ev)
		}
		ids[ev.ID] = true
	}

	// Commands.
	res, err := w.Exec(ctx, api.ExecRequest{Command: "mkdir -p src/e && echo hi > src/e/x && mv src/e/x src/e/y && echo more >> src/e/y && rm src/e/y && ln -s e src/l"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	m = marker()
	wantInOrder(t, "exec", all.until(t, m), "created dir src/e", "created file src/e/x", "modified file src/e/x",
		"deleted file src/e/x", "created file src/e/y", "modified file src/e/y", "deleted file src/e/y",
		"created symlink src/l")

	t.Run("Filter", func(t *testing.T) {
		if err := w.WriteFile(ctx, "src/end", nil); err != nil {
			t.Fatal(err)
		}
		got := src.until(t, "src/end")
		for _, ev := range got {
			if ev.Path != "src" && !strings.HasPrefix(ev.Path, "src/") {
				t.Errorf("filtered feed: %s", show(ev))
			}
		}
		wantInOrder(t, "filtered", got, "created dir src", "created file src/a.txt", "created dir src/e", "created symlink src/l")
	})

	t.Run("BadRequests", func(t *testing.T) {
		_, err := w.Changes(ctx, client.ChangesOptions{Path: "../x"})
		wantCode(t, "path ..", err, "path_escape", 400)
		_, err = w.Changes(ctx, client.ChangesOptions{Path: "/etc"})
		wantCode(t, "absolute path", err, "path_escape", 400)
		_, err = w.Changes(ctx, client.ChangesOptions{Since: "nonsense"})
		wantCode(t, "since", err, "invalid_argument", 400)
		_, err = d.admin.Workspace("nope").Changes(ctx, client.ChangesOptions{})
		wantCode(t, "unknown workspace", err, "not_found", 404)
	})

	t.Run("ResumeAndReset", func(t *testing.T) {
		from := byRoutes[len(byRoutes)-2] // the one before the last
		again := openFeed(t, w, client.ChangesOptions{Since: from.ID})
		if ev := <-again.ch; ev.ID != byRoutes[len(byRoutes)-1].ID {
			t.Errorf("resumed after %s with %+v, want %s", from.ID, ev, byRoutes[len(byRoutes)-1].ID)
		}
		unknown := openFeed(t, w, client.ChangesOptions{Since: "0bad0bad:7"})
		if ev := <-unknown.ch; ev.Op != "reset" || ev.Reason != "unknown_id" || ev.ID == "" {
			t.Errorf("unknown id: %+v, want a reset with an id", ev)
		}
		// The Last-Event-ID header is since too.
		req, _ := http.NewRequestWithContext(ctx, "GET", d.hs.URL+"/v1/workspaces/w/changes", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Last-Event-ID", "0bad0bad:7")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
			t.Fatalf("%d %s", resp.StatusCode, ct)
		}
		// Raw SSE: the reset with its id, then keepalives (200 ms here).
		sc := bufio.NewScanner(resp.Body)
		var lines []string
		for sc.Scan() && len(lines) < 8 {
			lines = append(lines, sc.Text())
		}
		raw := strings.Join(lines, "\n")
		if !strings.HasPrefix(raw, "id: ") || !strings.Contains(raw, "\nevent: reset\ndata: {") || !strings.Contains(raw, "\n: keepalive\n") {
			t.Errorf("raw stream:\n%s", raw)
		}
	})

	t.Run("HoldsMounted", func(t *testing.T) {
		time.Sleep(2500 * time.Millisecond) // idle timeout 1 s, scans every 100 ms
		if ws, err := d.admin.GetWorkspace(ctx, "w"); err != nil || ws.Status != "mounted" {
			t.Fatalf("with feeds open: %+v %v", ws, err)
		}
	})

	t.Run("RemountResets", func(t *testing.T) {
		last := byRoutes[len(byRoutes)-1].ID
		for _, f := range []*feed{all, src} {
			_ = f.s.Close()
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			ws, err := d.admin.GetWorkspace(ctx, "w")
			if err != nil {
				t.Fatal(err)
			}
			if ws.Status == "unmounted" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("still mounted after every feed closed")
			}
			time.Sleep(100 * time.Millisecond)
		}
		f := openFeed(t, w, client.ChangesOptions{Since: last})
		ev := <-f.ch
		if ev.Op != "reset" || ev.Reason != "unknown_id" {
			t.Fatalf("after a remount: %+v, want a reset", ev)
		}
		if strings.Split(ev.ID, ":")[0] == strings.Split(last, ":")[0] {
			t.Errorf("same epoch after a remount: %s and %s", last, ev.ID)
		}
	})

	t.Run("SlowReaderNeverBlocks", func(t *testing.T) {
		// A client that reads nothing, with a small receive buffer: the
		// daemon's writes to it stall at once, the mount's ring fills.
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096)
			}
			return c, err
		}}}
		s, err := d.admin.WithHTTPClient(hc).Workspace("w").Changes(ctx, client.ChangesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		start := time.Now()
		// touch: created and modified (utimensat) of each.
		res, err := w.Exec(ctx, api.ExecRequest{Command: "mkdir many && cd many && touch $(seq -f f%g 2000)", Timeout: 300})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %+v %v", res, err)
		}
		t.Logf("2000 touches while a client reads nothing: %v", time.Since(start))
		// Socket buffers between the client and the mount's ring hold a
		// few MB, so this client may get everything; past them and the
		// ring (fs/changefeed's TestSlowSubscriber) it would get an
		// overflow reset. Either way, in order and then live.
		m := marker()
		n, overflow := 0, false
		for {
			ev, err := s.Next()
			if err != nil {
				t.Fatalf("after %d events: %v", n, err)
			}
			if ev.Path == m {
				break
			}
			n++
			overflow = overflow || ev.Op == "reset" && ev.Reason == "overflow"
		}
		if n < 4001 && !overflow {
			t.Errorf("%d events and no overflow reset, want 4001", n)
		}
	})

	t.Run("ServerDiedRemounts", func(t *testing.T) {
		f := openFeed(t, w, client.ChangesOptions{})
		ctl, err := control.Find(ctx, filepath.Join(d.stateDir, "workspaces", "w", "mnt"))
		if err != nil {
			t.Fatal(err)
		}
		info, err := ctl.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-f.ch:
			if ev.Op != "reset" || ev.Reason != "remounted" {
				t.Fatalf("after the mount server died: %+v (end %q), want a reset (remounted)", ev, f.s.EndReason())
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no reset after the mount server died")
		}
		if err := w.WriteFile(ctx, "after-remount", nil); err != nil {
			t.Fatal(err)
		}
		wantInOrder(t, "after a remount", f.until(t, "after-remount"))
	})

	t.Run("EndOnExpiry", func(t *testing.T) {
		if _, err := d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "short", Lifetime: 2}); err != nil {
			t.Fatal(err)
		}
		f := openFeed(t, d.admin.Workspace("short"), client.ChangesOptions{})
		select {
		case err := <-f.err:
			if !errors.Is(err, io.EOF) || f.s.EndReason() != "expired" {
				t.Errorf("feed ended with %v, reason %q; want io.EOF after end expired", err, f.s.EndReason())
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the feed did not end with the lifetime")
		}
	})

	t.Run("EndOnDelete", func(t *testing.T) {
		d.create("gone")
		f := openFeed(t, d.admin.Workspace("gone"), client.ChangesOptions{})
		if err := d.admin.DeleteWorkspace(ctx, "gone"); err != nil {
			t.Fatalf("delete with a feed open: %v", err)
		}
		select {
		case err := <-f.err:
			if !errors.Is(err, io.EOF) || f.s.EndReason() != "deleted" {
				t.Errorf("feed ended with %v, reason %q; want io.EOF after end deleted", err, f.s.EndReason())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the feed did not end after the delete")
		}
	})

	t.Run("EndOnShutdown", func(t *testing.T) {
		f := openFeed(t, w, client.ChangesOptions{})
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := d.srv.Shutdown(sctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-f.err:
			if !errors.Is(err, io.EOF) || f.s.EndReason() != "shutdown" {
				t.Errorf("feed ended with %v, reason %q; want io.EOF after end shutdown", err, f.s.EndReason())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the feed did not end at shutdown")
		}
	})
}
