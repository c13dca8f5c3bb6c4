package blobstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/blobstore"
)

// TestFileMissingDirNotCreated: a file:// URL naming a directory that does
// not exist is an error that names it and says to run agentfs init, and
// creates nothing; Options.Create creates it.
func TestFileMissingDirNotCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "store")
	f := openErr(t, "file://"+dir, blobstore.KindPermanent, "does not exist", "agentfs init file://"+dir)
	if f.URL != "file://"+dir {
		t.Errorf("error URL %q", f.URL)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open created %s: %v", filepath.Dir(dir), err)
	}
	if _, _, err := blobstore.OpenDriver(context.Background(), "file://"+dir); err == nil {
		t.Error("OpenDriver of a missing directory succeeded")
	}
	s, err := blobstore.Open(context.Background(), "file://"+dir, blobstore.Options{Create: true})
	if err != nil {
		t.Fatalf("Open with Create: %v", err)
	}
	closeLater(t, s)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("Open with Create did not create %s: %v", dir, err)
	}
}

// TestFileStoreDirGone: once a file:// store's directory is moved away,
// writes fail with a permanent error naming it and never recreate it;
// reads find nothing. Moved back, the store works again.
func TestFileStoreDirGone(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := blobstore.Open(ctx, "file://"+dir, blobstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, s)
	if err := s.Put(ctx, "packs/a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	away := dir + ".away"
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	for _, put := range []func() error{
		func() error { return s.Put(ctx, "packs/b", []byte("b")) },
		func() error { return s.PutIfAbsent(ctx, "commits/main/2", []byte("c")) },
	} {
		err := put()
		if blobstore.KindOf(err) != blobstore.KindPermanent || !strings.Contains(err.Error(), "store directory "+dir+" is gone") {
			t.Errorf("write to a moved-away store = %v, want a permanent error naming the directory", err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a write recreated the store directory: %v", err)
	}
	if _, err := s.Get(ctx, "packs/a"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("read from a moved-away store = %v, want not found", err)
	}
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "packs/b", []byte("b")); err != nil {
		t.Errorf("write after moving the store back: %v", err)
	}
}

// TestFileWriteBlockedByFile: a write whose directory is taken by a file
// (mkdir: not a directory) is a permanent error that keeps its cause, not
// "not found"; a read below a file is not found.
func TestFileWriteBlockedByFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blobstore.Open(ctx, "file://"+dir, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, s)
	if err := s.Put(ctx, "packs", []byte("a file where a directory should be")); err != nil {
		t.Fatal(err)
	}
	err = s.Put(ctx, "packs/p1", []byte("x"))
	if k := blobstore.KindOf(err); k != blobstore.KindPermanent || errors.Is(err, blobstore.ErrNotFound) ||
		!strings.Contains(err.Error(), "not a directory") || !strings.Contains(err.Error(), `"packs/p1"`) {
		t.Errorf("write below a file = %v (kind %v), want a permanent error that says not a directory", err, k)
	}
	if _, err := s.Get(ctx, "packs/p1"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("read below a file = %v, want not found", err)
	}
}
