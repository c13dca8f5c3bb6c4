package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/client"
)

// startServe runs `agentfs serve` (with flags) on a free loopback port
// with its own store and state directory and returns its process, its URL and a client
// with the admin token.
func startServe(t *testing.T, base string, flags ...string) (*exec.Cmd, *client.Client) {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(base, "state")}, flags...)
	cmd := exec.Command(fstest.Binary(t), args...)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(base, "data"), "AGENTFS_TOKEN=tok")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Stop it as an operator would, so that it unmounts what it mounted.
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-done
			}
		}
	})
	sc := bufio.NewScanner(stderr)
	re := regexp.MustCompile(`url=(http://\S+)`)
	url := ""
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	if url == "" {
		t.Fatalf("agentfs serve did not report its address: %v", sc.Err())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return cmd, client.New(url, "tok")
}

// TestServeSIGTERM: with a command and a job running, SIGTERM ends both,
// syncs and unmounts every workspace, and exits 0; a new daemon on the
// same state sees everything written.
func TestServeSIGTERM(t *testing.T) {
	testenv.NeedFUSE(t)
	base := t.TempDir()
	cmd, c := startServe(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateWorkspace(ctx, api.CreateWorkspace{Name: "w"}); err != nil {
		t.Fatal(err)
	}
	w := c.Workspace("w")
	if err := w.WriteFile(ctx, "kept.txt", []byte("synced")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.StartJob(ctx, api.ExecRequest{Command: "sleep 300"}); err != nil {
		t.Fatal(err)
	}
	execDone := make(chan error, 1)
	go func() {
		_, err := w.Exec(ctx, api.ExecRequest{Command: "echo partial > during.txt; sleep 300"})
		execDone <- err
	}()
	time.Sleep(time.Second)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if err != nil {
		t.Fatalf("agentfs serve after SIGTERM: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("SIGTERM took %v", d)
	}
	if err := <-execDone; err == nil {
		t.Error("the running exec returned a result after SIGTERM")
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), base) {
		t.Errorf("a mount under %s is left:\n%s", base, mounts)
	}
	if out, _ := exec.Command("pgrep", "-f", base).Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("processes of %s left: %s", base, out)
	}

	_, c2 := startServe(t, base)
	w2 := c2.Workspace("w")
	for p, want := range map[string]string{"kept.txt": "synced", "during.txt": "partial\n"} {
		if data, err := w2.ReadFile(ctx, p); err != nil || string(data) != want {
			t.Errorf("after restart %s: %q %v", p, data, err)
		}
	}
	var ce *client.Error
	if _, err := w2.Job(ctx, "job-1"); !errors.As(err, &ce) || ce.Code != "not_found" {
		t.Errorf("job after restart: %v", err)
	}
}

// TestServeKill9: a kill -9 of the daemon in the middle of a command and
// a job; the next daemon on the same state kills what was left running,
// keeps the mount or remounts it, and everything a finished command wrote
// is there.
func TestServeKill9(t *testing.T) {
	testenv.NeedFUSE(t)
	base := t.TempDir()
	cmd, c := startServe(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateWorkspace(ctx, api.CreateWorkspace{Name: "w"}); err != nil {
		t.Fatal(err)
	}
	w := c.Workspace("w")
	if res, err := w.Exec(ctx, api.ExecRequest{Command: "echo synced > a.txt"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := w.StartJob(ctx, api.ExecRequest{Command: "sleep 301"}); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = w.Exec(ctx, api.ExecRequest{Command: "sleep 302"}) }()
	time.Sleep(time.Second)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	_, c2 := startServe(t, base)
	if data, err := c2.Workspace("w").ReadFile(ctx, "a.txt"); err != nil || string(data) != "synced\n" {
		t.Errorf("after kill -9 and restart: %q %v", data, err)
	}
	if out, _ := exec.Command("pgrep", "-f", "sleep 30[12]").Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("commands of the killed daemon still run: %s", out)
	}
}

// TestServeSecretsNotInheritedByCommands: the admin token (AGENTFS_TOKEN)
// and the key of the store's encrypted volume (AGENTFS_KEY) given to the
// daemon in its environment do not reach the environment of the commands
// it runs (the local backend starts from the daemon's own environment),
// and the daemon still opens the volume with that key.
func TestServeSecretsNotInheritedByCommands(t *testing.T) {
	testenv.NeedFUSE(t)
	base := t.TempDir()
	url := "file://" + filepath.Join(base, "vol")
	keyFile := filepath.Join(base, "key")
	const key = "c2VjcmV0IGtleSBzZWNyZXQga2V5IHNlY3JldCBrZXk="
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTFS_PASSPHRASE", "")
	if out, _, err := runCLI(t, time.Minute, "init", "--encrypt", "--key-file", keyFile, url); err != nil {
		t.Fatalf("init --encrypt: %v\n%s", err, out)
	}
	t.Setenv("AGENTFS_KEY", key)
	_, c := startServe(t, base, "--store", url)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.CreateWorkspace(ctx, api.CreateWorkspace{Name: "w"}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Workspace("w").Exec(ctx, api.ExecRequest{Command: "for v in AGENTFS_TOKEN AGENTFS_KEY AGENTFS_PASSPHRASE; do printenv $v || echo unset; done"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(res.Stdout); strings.Join(got, " ") != "unset unset unset" {
		t.Errorf("a command saw the daemon's secrets: %q (want unset for AGENTFS_TOKEN, AGENTFS_KEY, AGENTFS_PASSPHRASE)", res.Stdout)
	}
}

// TestServeLocalCommandEnv: the local backend's commands start from a base
// environment of the daemon's (PATH, HOME, ...), without the store
// credentials in its environment, plus the request's env; with
// --inherit-env they get the daemon's whole environment.
func TestServeLocalCommandEnv(t *testing.T) {
	testenv.NeedFUSE(t)
	creds := []string{"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS"}
	for _, v := range creds {
		t.Setenv(v, "daemon-"+v)
	}
	// HOME is the test's own: the agentfs binary is built with it.
	home := os.Getenv("HOME")
	if home == "" {
		t.Fatal("no HOME")
	}
	script := `for v in ` + strings.Join(creds, " ") + ` HOME REQ; do printenv $v || echo unset; done`
	for _, inherit := range []bool{false, true} {
		var flags []string
		want := "unset unset unset unset " + home + " r"
		if inherit {
			flags = []string{"--inherit-env"}
			want = "daemon-AWS_SECRET_ACCESS_KEY daemon-AWS_ACCESS_KEY_ID daemon-AWS_SESSION_TOKEN daemon-GOOGLE_APPLICATION_CREDENTIALS " + home + " r"
		}
		_, c := startServe(t, t.TempDir(), flags...)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if _, err := c.CreateWorkspace(ctx, api.CreateWorkspace{Name: "w"}); err != nil {
			cancel()
			t.Fatal(err)
		}
		res, err := c.Workspace("w").Exec(ctx, api.ExecRequest{Command: script, Env: map[string]string{"REQ": "r"}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(strings.Fields(res.Stdout), " "); got != want {
			t.Errorf("--inherit-env %v: the command saw %q, want %q", inherit, got, want)
		}
	}
}
