package serve_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/serve/api"
)

func TestExec(t *testing.T) {
	d := newDaemon(t, nil)
	w := d.create("ws")
	ctx := ctxT(t)
	if err := w.Mkdir(ctx, "sub", false); err != nil {
		t.Fatal(err)
	}
	res, err := w.Exec(ctx, api.ExecRequest{
		Command: `echo "$GREETING from $(basename "$PWD")"; echo oops >&2; cat; echo made > new.txt; exit 3`,
		Env:     map[string]string{"GREETING": "hello"}, Cwd: "sub", Stdin: "input\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Stdout != "hello from sub\ninput\n" || res.Stderr != "oops\n" || res.TimedOut || res.Encoding != "utf-8" {
		t.Errorf("result %+v", res)
	}
	if !strings.Contains(res.Output, "oops") || res.Changes == nil || len(res.Changes.Created) != 1 || res.Changes.Created[0] != "sub/new.txt" {
		t.Errorf("output %q changes %+v", res.Output, res.Changes)
	}
	// argv without a shell.
	res, err = w.Exec(ctx, api.ExecRequest{Argv: []string{"echo", "$HOME", "*"}})
	if err != nil || res.Stdout != "$HOME *\n" {
		t.Errorf("argv: %+v %v", res, err)
	}
	// Timeout kills the tree.
	start := time.Now()
	res, err = w.Exec(ctx, api.ExecRequest{Command: "sleep 30", Timeout: 0.5})
	if err != nil || !res.TimedOut || res.ExitCode != 137 || time.Since(start) > 20*time.Second {
		t.Errorf("timeout: %+v %v after %v", res, err, time.Since(start))
	}
	// Output cap.
	res, err = w.Exec(ctx, api.ExecRequest{Command: "head -c 10000 /dev/zero | tr '\\0' x", OutputLimit: 100})
	if err != nil || !res.Truncated || len(res.Stdout) != 100 {
		t.Errorf("output_limit: truncated %v len %d %v", res.Truncated, len(res.Stdout), err)
	}
	// Bytes that are not UTF-8 come back exactly in base64, both ways.
	bin := []byte{0xff, 0x00, 0xfe, 'a', '\n'}
	res, err = w.Exec(ctx, api.ExecRequest{Command: "cat", Stdin: base64.StdEncoding.EncodeToString(bin), Encoding: "base64"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := base64.StdEncoding.DecodeString(res.Stdout); string(got) != string(bin) || res.Encoding != "base64" {
		t.Errorf("base64 stdout %q (%q)", got, res.Stdout)
	}
	res, err = w.Exec(ctx, api.ExecRequest{Command: `printf '\377ok'`})
	if err != nil || res.Stdout != "\uFFFDok" {
		t.Errorf("utf-8 replacement: %q %v", res.Stdout, err)
	}
	// Malformed requests.
	_, err = w.Exec(ctx, api.ExecRequest{})
	wantCode(t, "no command", err, "invalid_argument", 400)
	_, err = w.Exec(ctx, api.ExecRequest{Command: "true", Argv: []string{"true"}})
	wantCode(t, "both", err, "invalid_argument", 400)
	_, err = w.Exec(ctx, api.ExecRequest{Command: "true", Encoding: "latin1"})
	wantCode(t, "encoding", err, "invalid_argument", 400)
	_, err = w.Exec(ctx, api.ExecRequest{Command: "true", Cwd: "missing"})
	wantCode(t, "missing cwd", err, "not_found", 404)
	_, err = d.admin.Workspace("nope").Exec(ctx, api.ExecRequest{Command: "true"})
	wantCode(t, "missing workspace", err, "not_found", 404)

	// The metrics count what happened.
	m, err := d.admin.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`agentfs_serve_requests_total{code="200",route="POST /v1/workspaces/{name}/exec"}`,
		`agentfs_serve_requests_total{code="400",route="POST /v1/workspaces/{name}/exec"}`,
		`agentfs_serve_request_duration_seconds_bucket{route="POST /v1/workspaces/{name}/exec",le="+Inf"}`,
		"agentfs_serve_workspaces_mounted 1", "agentfs_serve_commands_running 0", "agentfs_serve_jobs_running 0",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestExecStream(t *testing.T) {
	d := newDaemon(t, nil)
	w := d.create("ws")
	ctx := ctxT(t)
	var events []api.StreamEvent
	var firstAt time.Duration
	start := time.Now()
	res, err := w.ExecStream(ctx, api.ExecRequest{Command: "echo one; sleep 1; echo two >&2; exit 4"}, func(ev api.StreamEvent) {
		if len(events) == 0 {
			firstAt = time.Since(start)
		}
		events = append(events, ev)
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 4 || res.Stdout != "" {
		t.Errorf("result %+v", res)
	}
	if len(events) != 2 || events[0] != (api.StreamEvent{Type: "stdout", Data: "one\n"}) || events[1] != (api.StreamEvent{Type: "stderr", Data: "two\n"}) {
		t.Errorf("events %+v", events)
	}
	if total := time.Since(start); firstAt > total-500*time.Millisecond {
		t.Errorf("first event after %v of %v: not streamed", firstAt, total)
	}
	_, err = w.ExecStream(ctx, api.ExecRequest{Command: "true", Cwd: "../x"}, nil)
	wantCode(t, "stream escape", err, "path_escape", 400)
}

func TestJobs(t *testing.T) {
	d := newDaemon(t, nil)
	w := d.create("ws")
	ctx := ctxT(t)
	j, err := w.StartJob(ctx, api.ExecRequest{Command: "echo started; sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	if !j.Running || j.ID == "" || j.Command != "echo started; sleep 30" {
		t.Errorf("started %+v", j)
	}
	var out api.JobOutput
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out, err = w.JobOutput(ctx, j.ID, 0); err != nil || out.Output != "" {
			break
		}
	}
	if err != nil || out.Output != "started\n" || !out.Running || out.NextOffset != 8 {
		t.Errorf("output %+v %v", out, err)
	}
	if out, err = w.JobOutput(ctx, j.ID, 8); err != nil || out.Output != "" {
		t.Errorf("output from 8: %+v %v", out, err)
	}
	_, err = w.WaitJob(ctx, j.ID, 0.2)
	wantCode(t, "wait that times out", err, "timeout", 504)
	list, err := w.Jobs(ctx)
	if err != nil || len(list) != 1 || list[0].ID != j.ID {
		t.Errorf("jobs %+v %v", list, err)
	}
	k, err := w.KillJob(ctx, j.ID)
	if err != nil || k.Running || k.ExitCode == nil || *k.ExitCode != 137 || k.Result == nil {
		t.Errorf("killed %+v %v", k, err)
	}
	j2, err := w.StartJob(ctx, api.ExecRequest{Command: "echo done > f.txt; exit 2"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.WaitJob(ctx, j2.ID, 60)
	if err != nil || got.Running || *got.ExitCode != 2 || got.Result.Changes == nil || len(got.Result.Changes.Created) != 1 {
		t.Errorf("waited %+v %v", got, err)
	}
	_, err = w.Job(ctx, "job-999")
	wantCode(t, "unknown job", err, "not_found", 404)
}
