package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

// TestInit: init creates a volume with branch main whose root belongs to
// the caller; a second init of the same URL fails and says so.
func TestInit(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "vol")
	out, _, err := runCLI(t, time.Minute, "init", url)
	if err != nil || !strings.Contains(out, "initialized volume") {
		t.Fatalf("init: %v\n%s", err, out)
	}
	ctx := t.Context()
	store, err := blobstore.Open(ctx, url, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	repo, err := snapshot.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	head, err := repo.Head(ctx, snapshot.DefaultBranch)
	if err != nil || head.ID.Seq != 1 || head.Root.Mode != 0o755 {
		t.Errorf("first commit: %+v, %v", head, err)
	}
	out, _, err = runCLI(t, time.Minute, "init", url)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second init: %v\n%s", err, out)
	}
}
