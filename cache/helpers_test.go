package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

var memSeq atomic.Int64

// testStoreURL returns a fresh shared in-memory store URL.
func testStoreURL(t testing.TB) string {
	return fmt.Sprintf("mem://cache-test-%d-%d", os.Getpid(), memSeq.Add(1))
}

// initVolume creates a volume with an empty main branch at url.
func initVolume(t testing.TB, url string, cfgs ...func(*snapshot.Config)) {
	t.Helper()
	ctx := context.Background()
	s, err := blobstore.Open(ctx, url, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := snapshot.NewConfig(time.Now())
	for _, f := range cfgs {
		f(&cfg)
	}
	var r *snapshot.Repo
	if cfg.Encryption != snapshot.EncryptionNone { // set by encrypted()
		r, err = snapshot.InitEncrypted(ctx, s, cfg, testKey)
	} else {
		r, err = snapshot.Init(ctx, s, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateBranchEmpty(ctx, "main", 0o755, 0, 0, time.Now(), "test", "init"); err != nil {
		t.Fatal(err)
	}
}

// testKey locks the encrypted test volumes; testKeys gives it.
var testKey = snapshot.UserKey{Key: []byte("cache test key: 32 bytes or more")}

func testKeys(bool) (snapshot.UserKey, error) { return testKey, nil }

// encrypted is an initVolume option: the volume is encrypted with testKey
// (every open in these tests passes testKeys, which a plain volume ignores).
func encrypted(c *snapshot.Config) { c.Encryption = snapshot.EncryptionXAES }

type volOpt func(*Options)

// openVolume opens url with a cache dir (a fresh one if dir is "").
func openVolume(t testing.TB, url, dir string, opts ...volOpt) *Volume {
	t.Helper()
	ctx := context.Background()
	s, err := blobstore.Open(ctx, url, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := snapshot.OpenWithKey(ctx, s, testKeys)
	if err != nil {
		t.Fatal(err)
	}
	if dir == "" {
		dir = t.TempDir()
	}
	o := Options{Repo: r, CacheDir: dir, CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	v, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := v.Close(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return v
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// writeFile creates parent/name with data through the engine API.
func writeFile(t testing.TB, v *Volume, parent uint64, name string, data []byte) Attr {
	t.Helper()
	ctx := context.Background()
	a, err := v.Create(ctx, parent, name, 0o644, Cred{}, false, true)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if len(data) > 0 {
		if _, err := v.Write(ctx, a.Ino, data, 0); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
	}
	if err := v.Release(ctx, a.Ino); err != nil {
		t.Fatal(err)
	}
	return a
}

// readFile reads a whole file by inode.
func readFile(t testing.TB, v *Volume, ino uint64) []byte {
	t.Helper()
	ctx := context.Background()
	a, err := v.Open(ctx, ino, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = v.Release(ctx, ino) }()
	buf := make([]byte, a.Size+10)
	n, err := v.Read(ctx, ino, buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}
