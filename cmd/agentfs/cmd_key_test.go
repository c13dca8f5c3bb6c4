package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/mountinfo"
)

// TestEncryptedVolumeCLI: init --encrypt; every command that opens the
// volume by URL says, without the key or with a wrong one, which volume
// and what to pass; with the key they work; key rotate moves the volume to
// a new key and the old one stops opening it. mount, too, refuses without
// the key or with a wrong one before it mounts anything.
func TestEncryptedVolumeCLI(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + filepath.Join(dir, "vol")
	oldKey, newKey := filepath.Join(dir, "old.key"), filepath.Join(dir, "new.key")
	for f, k := range map[string]string{oldKey: "b2xkIGtleSBvbGQga2V5IG9sZCBrZXkgb2xkIGtleSA=\n", newKey: "bmV3IGtleSBuZXcga2V5IG5ldyBrZXkgbmV3IGtleSA=\n"} {
		if err := os.WriteFile(f, []byte(k), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AGENTFS_KEY", "")
	t.Setenv("AGENTFS_PASSPHRASE", "")
	out, _, err := runCLI(t, time.Minute, "init", "--encrypt", "--key-file", oldKey, url)
	if err != nil || !strings.Contains(out, "encrypted") {
		t.Fatalf("init --encrypt: %v\n%s", err, out)
	}
	cmds := [][]string{{"fsck", url}, {"gc", "--dry-run", url}, {"snapshot", "list", url}, {"branch", "list", url}, {"volume", "info", url}, {"retention", "show", url}}
	for _, c := range cmds {
		_, _, err := runCLI(t, time.Minute, c...)
		if err == nil || !strings.Contains(err.Error(), url[len("file://"):]) || !strings.Contains(err.Error(), "--key-file") {
			t.Errorf("%v without a key: %v", c, err)
		}
		_, _, err = runCLI(t, time.Minute, append(c[:len(c)-1:len(c)-1], "--key-file", newKey, url)...)
		if err == nil || !strings.Contains(err.Error(), "does not open it") {
			t.Errorf("%v with a wrong key: %v", c, err)
		}
		if out, _, err := runCLI(t, time.Minute, append(c[:len(c)-1:len(c)-1], "--key-file", oldKey, url)...); err != nil {
			t.Errorf("%v with the key: %v\n%s", c, err, out)
		}
	}
	// mount refuses before it mounts anything: the same errors as the other commands.
	mnt := t.TempDir()
	for _, keyArgs := range [][]string{nil, {"--key-file", newKey}} {
		args := append(append([]string{"mount", "--cache-dir", t.TempDir()}, keyArgs...), url, mnt)
		_, _, err := runCLI(t, time.Minute, args...)
		want := "--key-file"
		if keyArgs != nil {
			want = "does not open it"
		}
		if err == nil || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v", args, err)
		}
		if ms, err := mountinfo.Read(); err != nil {
			t.Fatal(err)
		} else if m, ok := mountinfo.Find(ms, mnt); ok && m.MountPoint == mnt {
			t.Fatalf("%v mounted %s", args, mnt)
		}
	}
	out, _, err = runCLI(t, time.Minute, "volume", "info", "--key-file", oldKey, url)
	if err != nil || !strings.Contains(out, "xaes-256-gcm, locked with a key (hkdf-sha256)") {
		t.Errorf("volume info: %v\n%s", err, out)
	}
	t.Setenv("AGENTFS_KEY", strings.TrimSpace(string(must(os.ReadFile(oldKey)))))
	out, _, err = runCLI(t, time.Minute, "key", "rotate", "--new-key-file", newKey, url)
	if err != nil || !strings.Contains(out, "now locked with a key") {
		t.Fatalf("key rotate: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, time.Minute, "fsck", url); err == nil || !strings.Contains(err.Error(), "does not open it") {
		t.Errorf("old key after rotate: %v", err)
	}
	t.Setenv("AGENTFS_KEY", "")
	t.Setenv("AGENTFS_PASSPHRASE", "a passphrase for the test")
	if _, _, err := runCLI(t, time.Minute, "key", "rotate", "--key-file", newKey, url); err == nil || !strings.Contains(err.Error(), "--new-key-file") {
		t.Errorf("rotate without a new key: %v", err)
	}
	t.Setenv("AGENTFS_NEW_PASSPHRASE", "a passphrase for the test")
	if out, _, err := runCLI(t, time.Minute, "key", "rotate", "--key-file", newKey, url); err != nil || !strings.Contains(out, "passphrase") {
		t.Fatalf("rotate to a passphrase: %v\n%s", err, out)
	}
	if out, _, err := runCLI(t, time.Minute, "fsck", url); err != nil {
		t.Errorf("fsck with AGENTFS_PASSPHRASE: %v\n%s", err, out)
	}
	if out, _, err := runCLI(t, time.Minute, "volume", "info", url); err != nil || !strings.Contains(out, "locked with a passphrase (argon2id: 3 passes, 64") {
		t.Errorf("volume info of a passphrase volume: %v\n%s", err, out)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
