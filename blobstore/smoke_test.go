package blobstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentfs/agentfs/blobstore"
)

func TestSmoke(t *testing.T) {
	for _, u := range []string{"mem://", "file://" + t.TempDir()} {
		ctx := context.Background()
		s, err := blobstore.Open(ctx, u, blobstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutIfAbsent(ctx, "a/b c", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		err = s.PutIfAbsent(ctx, "a/b c", []byte("hi"))
		if !errors.Is(err, blobstore.ErrExists) {
			t.Fatalf("%s: %v", u, err)
		}
		_, err = s.Get(ctx, "nope")
		if !errors.Is(err, blobstore.ErrNotFound) {
			t.Fatalf("%s: %v", u, err)
		}
		t.Log(err)
		p, err := s.List(ctx, "a/", "", 10)
		if err != nil || len(p.Objects) != 1 {
			t.Fatal(p, err)
		}
	}
}

// TestFileInternalKeys: a file:// store never lists its lock file or the
// temporary files of writes in progress, and refuses keys that look like
// them.
func TestFileInternalKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blobstore.Open(ctx, "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// A write in progress, as fileblob names it.
	if err := os.WriteFile(filepath.Join(dir, "b.18a2b3c4d5e6f708.tmp"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := s.Walk(ctx, "", func(o blobstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "a" {
		t.Fatalf("listing = %v, want [a]", keys)
	}
	if err := s.Put(ctx, "c.1f.tmp", []byte("x")); err == nil {
		t.Fatal("a key shaped like a temporary file was accepted")
	}
}
