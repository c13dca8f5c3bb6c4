package main

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
