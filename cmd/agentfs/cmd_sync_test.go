package main

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/fstest"
)

// TestSync: with automatic checkpoints off, writes wait in the cache until
// `agentfs sync`, which commits them; a fresh mount of the store sees them.
func TestSync(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=-1s"}})
	c := m.Client(t)
	ctx := context.Background()
	before, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 100_000)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "a"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	waiting, err := c.Status(ctx)
	if err != nil || waiting.Volume.DirtyFiles != 1 || waiting.Volume.DirtyBytes < 100_000 {
		t.Fatalf("status before sync: %+v, %v", waiting.Volume, err)
	}
	out, err := m.Agentfs("sync", m.Dir)
	if err != nil || !strings.Contains(out, "synced "+m.Dir) {
		t.Fatalf("agentfs sync: %v\n%s", err, out)
	}
	after, err := c.Status(ctx)
	if err != nil || after.Volume.DirtyFiles != 0 || after.Volume.DirtyDirs != 0 || after.Volume.HeadSeq <= before.Volume.HeadSeq {
		t.Fatalf("status after sync: %+v (before: head %d), %v", after.Volume, before.Volume.HeadSeq, err)
	}
	if after.Store.BlobPuts == 0 || after.Store.BytesUploaded < 100_000 {
		t.Errorf("store counters after sync: %+v", after.Store)
	}
	fresh := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "fresh")})
	if b, err := os.ReadFile(filepath.Join(fresh.Dir, "a")); err != nil || len(b) != 100_000 {
		t.Errorf("synced file in a fresh mount: %d bytes, %v", len(b), err)
	}
	if out, err := m.Agentfs("sync", t.TempDir()); err == nil || !strings.Contains(out, "not an agentfs mount") {
		t.Errorf("sync of a plain directory: %v\n%s", err, out)
	}
}

// TestSyncStoreGone: with the store gone, `sync --timeout` (not on a
// terminal) fails naming the store, the mount's last error and its cache,
// and so does `umount --timeout`, which leaves the mount; `umount --force` detaches at once but fails, saying the changes are only
// in the cache; with the store back, a mount with that cache uploads them.
func TestSyncStoreGone(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=-1s"}})
	if err := os.WriteFile(filepath.Join(m.Dir, "late.txt"), []byte("written while the store was away"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := strings.TrimPrefix(m.URL, "file://")
	if err := os.Rename(store, store+".away"); err != nil {
		t.Fatal(err)
	}
	out, err := m.Agentfs("sync", "--timeout", "3s", m.Dir)
	for _, want := range []string{"not done after --timeout 3s", "waiting for the store " + m.URL, "last error was: ", "cache " + m.CacheDir} {
		if exitCode(err) != exitFailure || !strings.Contains(out, want) {
			t.Errorf("sync with the store gone: %v, want exit 1 and %q:\n%s", err, want, out)
		}
	}
	if strings.Contains(out, "last error was: none yet") {
		t.Errorf("sync did not report the mount's last error:\n%s", out)
	}
	out, err = m.Agentfs("umount", "--timeout", "2s", m.Dir)
	if exitCode(err) != exitFailure || !strings.Contains(out, "umount "+m.Dir+": not done after --timeout 2s: waiting for the store "+m.URL) || !strings.Contains(out, "nothing was unmounted") {
		t.Errorf("umount --timeout with the store gone: %v, want exit 1\n%s", err, out)
	}
	if on, _ := afs.IsMountPoint(m.Dir); !on {
		t.Fatalf("umount --timeout that gave up unmounted")
	}
	out, err = m.Agentfs("umount", "--force", m.Dir)
	if exitCode(err) != exitFailure || !strings.Contains(out, "detached, but the sync before it failed") || !strings.Contains(out, m.CacheDir) {
		t.Errorf("umount --force with the store gone: %v, want exit 1\n%s", err, out)
	}
	if !fstest.WaitExit(m.PID, time.Minute) {
		t.Fatalf("the server did not exit after umount --force")
	}
	if err := os.Rename(store+".away", store); err != nil {
		t.Fatal(err)
	}
	again := fstest.Start(t, fstest.Options{URL: m.URL, CacheDir: m.CacheDir, Dir: m.Dir})
	again.Unmount(t)
	fresh := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "fresh")})
	if b, err := os.ReadFile(filepath.Join(fresh.Dir, "late.txt")); err != nil || string(b) != "written while the store was away" {
		t.Errorf("the file written while the store was away, from the store: %q, %v", b, err)
	}
}
