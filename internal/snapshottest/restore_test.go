package snapshottest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/snapshot"
)

var urlSeq atomic.Int64

// forEachStore runs f on a fresh mem:// store, file:// directory and S3
// bucket on MinIO (started once for the three; without MinIO the minio
// subtest fails under CI and is skipped with the reason elsewhere).
func forEachStore(t *testing.T, f func(t *testing.T, url string)) {
	testservices.StartMinIO(t) // keeps the server up across the subtests
	t.Run("mem", func(t *testing.T) { f(t, fmt.Sprintf("mem://snapshottest-%d-%d", os.Getpid(), urlSeq.Add(1))) })
	t.Run("file", func(t *testing.T) { f(t, "file://"+t.TempDir()) })
	t.Run("minio", func(t *testing.T) { f(t, testservices.StartMinIO(t)) })
}

func randBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// populate writes a workspace with every kind of entry.
func populate(w *Workspace) {
	w.WriteFile("README.md", []byte("# project\n"))
	w.WriteFile("src/main.go", []byte("package main\n\nfunc main() {}\n"))
	w.WriteFile("src/big.bin", randBytes(1, 3*ChunkSize+123)) // 4 chunks
	w.WriteFile("src/sparse", nil)
	w.Chmod("src/main.go", 0o600)
	w.Mkdir("empty", 0o700)
	w.Symlink("link", "src/main.go")
	w.Mkfifo("pipe")
	w.WriteFile("data/shared", []byte("one file, two names"))
	w.Link("data/shared", "other-name")
	w.SetXattr("README.md", "user.tag", []byte("v1"))
	w.SetXattr("src", "user.dir", []byte{0, 1, 2})
}

func diffManifests(t *testing.T, what string, got, want posixtest.Manifest) {
	t.Helper()
	if d := posixtest.Diff(want, got, posixtest.IgnoreAtime); len(d) > 0 {
		t.Fatalf("%s differs:\n%s", what, strings.Join(d, "\n"))
	}
}

// TestSaveRestoreRoundTrip: a snapshot records exactly what the writer
// wrote, and restoring it gives a workspace identical to the one saved
// (content hashes, modes, times, links, xattrs), while the automatic
// pre-restore snapshot holds the state it replaced.
func TestSaveRestoreRoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		_, repo := InitVolume(t, url)
		w := OpenWorkspace(t, repo, "main")
		populate(w)
		w.Sync()
		saved := w.Manifest()
		s, err := repo.SaveSnapshot(ctx, "good", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{Message: "all tests pass"})
		if err != nil {
			t.Fatal(err)
		}
		tree, err := ManifestOfTree(ctx, repo, s.Tree())
		if err != nil {
			t.Fatal(err)
		}
		diffManifests(t, "snapshot vs workspace", tree, saved)

		// The agent breaks things.
		w.WriteFile("src/main.go", []byte("package main // broken\n"))
		w.Remove("src/big.bin")
		w.Remove("other-name")
		w.WriteFile("junk/tmp.txt", []byte("junk"))
		w.SetXattr("README.md", "user.tag", []byte("v2"))
		w.Sync()
		broken := w.Manifest()

		// A restore while the workspace is mounted is refused, naming it.
		_, err = repo.Restore(ctx, "good", "main", snapshot.RestoreOptions{})
		var held *snapshot.LeaseHeldError
		if !errors.As(err, &held) || held.Holder.Mount != "/test/main" {
			t.Fatalf("restore of a mounted branch: %v", err)
		}
		w.Close()
		res, err := repo.Restore(ctx, "good", "main", snapshot.RestoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A fresh mount of main is the saved workspace again.
		w2 := OpenWorkspace(t, repo, "main")
		diffManifests(t, "restored workspace", w2.Manifest(), saved)
		if got := w2.ReadFile("src/big.bin"); !bytes.Equal(got, randBytes(1, 3*ChunkSize+123)) {
			t.Fatal("big.bin differs after restore")
		}
		// The state before the restore is kept.
		auto, err := repo.GetSnapshot(ctx, res.Saved.Name)
		if err != nil {
			t.Fatal(err)
		}
		am, err := ManifestOfTree(ctx, repo, auto.Tree())
		if err != nil {
			t.Fatal(err)
		}
		diffManifests(t, "automatic pre-restore snapshot", am, broken)
		// Writing on after a restore works, and so does undoing it.
		w2.WriteFile("after.txt", []byte("after restore"))
		w2.Sync()
		w2.Close()
		if _, err := repo.Restore(ctx, res.Saved.Name, "main", snapshot.RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		w3 := OpenWorkspace(t, repo, "main")
		diffManifests(t, "undone restore", w3.Manifest(), broken)
		MustFsck(t, repo)
	})
}
