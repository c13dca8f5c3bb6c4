package mountproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSecretsEncoding(t *testing.T) {
	in := []string{"A=1", "B=x:y=z\x00w\nv", "EMPTY=", "A=2"}
	got, err := decodeSecrets(encodeSecrets(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "2", "B": "x:y=z\x00w\nv", "EMPTY": ""}
	if len(got) != len(want) {
		t.Fatalf("decoded %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got, err := decodeSecrets(encodeSecrets(nil)); err != nil || len(got) != 0 {
		t.Errorf("no secrets: %q, %v", got, err)
	}
	for _, bad := range []string{"4:A=1", "x:A=1", "-1:", "3:abc", "A=1", "3:A=1", "0:3:A=10:", "3:A=10:0:", "3:A=10:x"} {
		if _, err := decodeSecrets([]byte(bad)); err == nil {
			t.Errorf("decodeSecrets(%q) accepted it", bad)
		}
	}
}

// TestSecretsTruncated: a stream cut anywhere before its end record —
// nothing at all (the parent died before writing, or another process
// read the pipe first), inside a length or an entry, or after whole
// entries — is an error that says so, never secrets without the URL
// (with which a server would mount the default store).
func TestSecretsTruncated(t *testing.T) {
	enc := encodeSecrets([]string{"AGENTFS_KEY=k", URLSecret + "=file:///store"})
	for n := range len(enc) {
		if got, err := decodeSecrets(enc[:n]); !errors.Is(err, errTruncated) {
			t.Errorf("decodeSecrets(%q) = %q, %v; want errTruncated", enc[:n], got, err)
		}
	}
	got, err := decodeSecrets(enc)
	if err != nil || len(got) != 2 || got[URLSecret] != "file:///store" || got["AGENTFS_KEY"] != "k" {
		t.Errorf("decodeSecrets(%q) = %q, %v", enc, got, err)
	}

	readPipe := func(data []byte) (map[string]string, error) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
		fd, err := syscall.Dup(int(r.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
		return ReadSecrets(fd)
	}
	for _, data := range [][]byte{nil, enc[:len(enc)-2], enc[:len(enc)-5]} {
		if got, err := readPipe(data); err == nil || !strings.Contains(err.Error(), "truncated: the agentfs process that started this server exited") {
			t.Errorf("ReadSecrets of %q = %q, %v; want truncated", data, got, err)
		}
	}
	if got, err := readPipe(enc); err != nil || got[URLSecret] != "file:///store" {
		t.Errorf("ReadSecrets of %q = %q, %v", enc, got, err)
	}
	if _, err := ReadSecrets(-1); err == nil {
		t.Error("ReadSecrets(-1) succeeded")
	}
}

func TestSplitSecrets(t *testing.T) {
	env := []string{"PATH=/bin", "AGENTFS_KEY=k", "AGENTFS_PASSPHRASE=p", "AGENTFS_NEW_KEY=n", "AGENTFS_NEW_PASSPHRASE=np",
		"AGENTFS_TOKEN=t", "AGENTFS_MOUNT_URL=u", "AGENTFS_KEYS=kept", "HOME=/root"}
	rest, secrets := splitSecrets(env)
	if want := []string{"PATH=/bin", "AGENTFS_KEYS=kept", "HOME=/root"}; !slices.Equal(rest, want) {
		t.Errorf("environment %q, want %q", rest, want)
	}
	if want := []string{"AGENTFS_KEY=k", "AGENTFS_PASSPHRASE=p"}; !slices.Equal(secrets, want) {
		t.Errorf("secrets %q, want %q", secrets, want)
	}
}

// fakeServerEnv makes the test binary, started by Start in
// TestStartPassesSecretsByPipe, a fake mount server: it writes what it
// was given (fakeReport) to report.json in its --cache-dir and reports
// itself ready.
const fakeServerEnv = "AGENTFS_TEST_FAKE_MOUNT_SERVER"

// fakeReport is what the fake server was given.
type fakeReport struct {
	Args    []string
	Environ string // its /proc/self/environ, as the kernel shows it to others
	Secrets map[string]string
	Err     string
}

func init() {
	if os.Getenv(fakeServerEnv) == "" {
		return
	}
	rep := fakeReport{Args: os.Args[1:]}
	environ, err := os.ReadFile("/proc/self/environ")
	rep.Environ = string(environ)
	if err == nil {
		rep.Secrets, err = ReadSecrets(SecretsFD)
	}
	if err != nil {
		rep.Err = err.Error()
	}
	dir := ""
	for _, a := range os.Args {
		if d, ok := strings.CutPrefix(a, "--cache-dir="); ok {
			dir = d
		}
	}
	b, _ := json.Marshal(rep)
	if err := os.WriteFile(filepath.Join(dir, "report.json"), b, 0o600); err != nil {
		println(err.Error())
		os.Exit(2)
	}
	ready := os.NewFile(3, "ready")
	_, _ = ready.WriteString("ok\n")
	os.Exit(0)
}

// TestStartPassesSecretsByPipe: a server started by Start finds the
// volume's key (from the caller's environment and from Spec.Secrets,
// which wins) and the store URL on its secrets descriptor, and none of
// them, nor the admin token or a rotation's new key, in its
// /proc/PID/environ, which is what the kernel shows other processes of
// the same user from its execve on.
func TestStartPassesSecretsByPipe(t *testing.T) {
	dir := t.TempDir()
	const (
		key   = "key-in-the-callers-environment"
		pass  = "passphrase-of-spec-secrets"
		url   = "s3://bucket/prefix?secret_access_key=url-secret"
		token = "admin-token-of-the-daemon"
		newK  = "new-key-of-a-rotation"
	)
	env := append(os.Environ(), fakeServerEnv+"=1", "AGENTFS_KEY="+key, "AGENTFS_PASSPHRASE=overridden",
		"AGENTFS_TOKEN="+token, "AGENTFS_NEW_KEY="+newK)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := Start(ctx, Spec{Exe: os.Args[0], URL: url, MountPoint: filepath.Join(dir, "mnt"), CacheDir: dir,
		Env: env, Secrets: []string{"AGENTFS_PASSPHRASE=" + pass}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep fakeReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Err != "" {
		t.Fatalf("the server: %s", rep.Err)
	}
	want := map[string]string{"AGENTFS_KEY": key, "AGENTFS_PASSPHRASE": pass, URLSecret: url}
	if len(rep.Secrets) != len(want) {
		t.Errorf("secrets %q, want %q", rep.Secrets, want)
	}
	for k, v := range want {
		if rep.Secrets[k] != v {
			t.Errorf("secret %s = %q, want %q", k, rep.Secrets[k], v)
		}
	}
	for _, s := range []string{key, pass, "overridden", "url-secret", token, newK, "AGENTFS_KEY=", "AGENTFS_PASSPHRASE=", "AGENTFS_TOKEN="} {
		if strings.Contains(rep.Environ, s) {
			t.Errorf("the server's /proc/PID/environ holds %q", s)
		}
		for _, a := range rep.Args {
			if strings.Contains(a, s) {
				t.Errorf("the server's argv holds %q: %q", s, rep.Args)
			}
		}
	}
	if !bytes.Contains([]byte(rep.Environ), []byte(fakeServerEnv+"=1\x00")) || !strings.Contains(rep.Environ, "GODEBUG=") {
		t.Errorf("the server's environment lost the caller's variables or ServerEnv's: %q", rep.Environ)
	}
	if !slices.Contains(rep.Args, "--secrets-fd=4") {
		t.Errorf("args %q lack --secrets-fd=4", rep.Args)
	}
}
