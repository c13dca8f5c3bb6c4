package serve_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/serve"
	"github.com/agentfs/agentfs/serve/api"
)

func TestLimits(t *testing.T) {
	d := newDaemon(t, func(o *serve.Options) {
		o.MaxJSONBytes = 1 << 10
		o.MaxBodyBytes = 4 << 10
		o.MaxCommands = 1
		o.MaxJobs = 1
		o.RequestTimeout = 2 * time.Second
	})
	w := d.create("ws")
	d.create("other")
	ctx := ctxT(t)
	_, err := w.Exec(ctx, api.ExecRequest{Command: "echo " + strings.Repeat("x", 2<<10)})
	wantCode(t, "JSON body over the cap", err, "too_large", 413)
	wantCode(t, "upload over the cap", w.WriteFile(ctx, "big", bytes.Repeat([]byte("x"), 5<<10)), "too_large", 413)
	if err := w.WriteFile(ctx, "small", bytes.Repeat([]byte("x"), 4<<10)); err != nil {
		t.Errorf("upload at the cap: %v", err)
	}

	// One command at a time in a workspace: a second is refused (busy),
	// another workspace is not affected.
	j, err := w.StartJob(ctx, api.ExecRequest{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Exec(ctx, api.ExecRequest{Command: "true"})
	wantCode(t, "second command", err, "busy", 429)
	_, err = d.admin.Workspace("other").StartJob(ctx, api.ExecRequest{Command: "true"})
	wantCode(t, "job past the server's cap", err, "busy", 429)
	if res, err := d.admin.Workspace("other").Exec(ctx, api.ExecRequest{Command: "true"}); err != nil || res.ExitCode != 0 {
		t.Errorf("other workspace: %+v %v", res, err)
	}
	if _, err := w.KillJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(ctx, api.ExecRequest{Command: "true"}); err != nil {
		t.Errorf("after the job ended: %v", err)
	}

	// A command's deadline is its timeout plus the request timeout, not
	// the request timeout alone.
	if res, err := w.Exec(ctx, api.ExecRequest{Command: "sleep 3", Timeout: 10}); err != nil || res.ExitCode != 0 {
		t.Errorf("command longer than the request timeout: %+v %v", res, err)
	}
	// A client that goes away kills its command.
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = w.Exec(cctx, api.ExecRequest{Command: "sleep 30"})
	if err == nil {
		t.Fatal("exec outlived its client")
	}
	// Its slot frees once the server has killed it (not at once).
	for {
		_, err := w.Exec(ctx, api.ExecRequest{Command: "true"})
		if err == nil {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("after the client left: %v after %v", err, time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
