package blobstore_test

import (
	"context"
	"errors"
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
