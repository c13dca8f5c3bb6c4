package overlay

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/snapshot"
)

var storeSeq atomic.Int64

func newRepo(t *testing.T) *snapshot.Repo {
	t.Helper()
	ctx := context.Background()
	url := fmt.Sprintf("mem://overlay-%d-%d", os.Getpid(), storeSeq.Add(1))
	s, err := blobstore.Open(ctx, url, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := snapshot.NewConfig(time.Now())
	cfg.ChunkSize = 1 << 20
	r, err := snapshot.Init(ctx, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateBranchEmpty(ctx, "main", 0o755, 0, 0, time.Now(), "test", "init"); err != nil {
		t.Fatal(err)
	}
	return r
}

func openVol(t *testing.T, r *snapshot.Repo, branch, dir string, lower cache.Lower) *cache.Volume {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	v, err := cache.Open(context.Background(), cache.Options{Repo: r, CacheDir: dir, Branch: branch, Lower: lower,
		CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close(context.Background()) })
	return v
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func read(t *testing.T, v *cache.Volume, path string) []byte {
	t.Helper()
	w := &Workspace{vol: v}
	b, _, err := w.readLive(context.Background(), path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func write(t *testing.T, v *cache.Volume, path string, data []byte, off uint64) {
	t.Helper()
	ctx := context.Background()
	dir, name := split(path)
	d := must[cache.Attr](t)(lookupPath(ctx, v, dir))
	a, err := v.Create(ctx, d.Ino, name, 0o644, cache.Cred{}, false, off == 0) // offset 0: replace
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	if _, err := v.Write(ctx, a.Ino, data, off); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	_ = v.Release(ctx, a.Ino)
}

func hostTree(t *testing.T, dir string) posixtest.Manifest {
	t.Helper()
	m, err := posixtest.ManifestOf(dir, posixtest.ManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func changeList(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	sort.Strings(out)
	return out
}

// TestHostBase: a workspace over a host directory reads through to it,
// never modifies it, survives remounts, and diff/discard/commit do what
// they say.
func TestHostBase(t *testing.T) {
	ctx := context.Background()
	host := t.TempDir()
	big := make([]byte, 5<<20+123)
	_, _ = rand.Read(big)
	for p, data := range map[string][]byte{
		"a.txt": []byte("alpha\n"), "src/main.go": []byte("package main\n"), "src/big.bin": big,
		"docs/readme": []byte("read me\n"), "src/deep/x/y.txt": []byte("deep\n"),
	} {
		if err := os.MkdirAll(filepath.Join(host, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("src/main.go", filepath.Join(host, "link")); err != nil {
		t.Fatal(err)
	}
	before := hostTree(t, host)

	repo := newRepo(t)
	branch, hd, err := Prepare(ctx, repo, "ws", Base{HostDir: host}, "testhost", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	v := openVol(t, repo, branch, cacheDir, hd)
	if got := read(t, v, "src/big.bin"); !bytes.Equal(got, big) {
		t.Fatal("big.bin does not read through")
	}
	// One byte in the middle of a large base file: only its chunk is copied up.
	write(t, v, "src/big.bin", []byte{'!'}, 3<<20+7)
	want := bytes.Clone(big)
	want[3<<20+7] = '!'
	if got := read(t, v, "src/big.bin"); !bytes.Equal(got, want) {
		t.Fatal("big.bin after a one-byte write")
	}
	write(t, v, "new.txt", []byte("new\n"), 0)
	root := must[cache.Attr](t)(lookupPath(ctx, v, ""))
	docs := must[cache.Attr](t)(lookupPath(ctx, v, "docs"))
	if err := v.Unlink(ctx, docs.Ino, "readme"); err != nil {
		t.Fatal(err)
	}
	if err := v.Rename(ctx, root.Ino, "src", root.Ino, "lib", 0); err != nil {
		t.Fatal(err)
	}
	write(t, v, "lib/main.go", []byte("package lib\n"), 0)
	if got := read(t, v, "lib/deep/x/y.txt"); string(got) != "deep\n" {
		t.Fatalf("renamed base directory does not read through: %q", got)
	}
	if d := posixtest.Diff(before, hostTree(t, host)); len(d) > 0 {
		t.Fatalf("the host directory changed: %v", d)
	}
	wantDiff := []string{"A new.txt", "D docs/readme", "M lib/big.bin", "M lib/main.go", "R src -> lib"}
	w := must[*Workspace](t)(NewWorkspace(ctx, v, hd))
	if got := changeList(must[[]Change](t)(w.Diff(ctx))); !reflect.DeepEqual(got, wantDiff) {
		t.Fatalf("diff = %v, want %v", got, wantDiff)
	}
	other, err := OpenHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if _, err := NewWorkspace(ctx, v, other); !errors.Is(err, ErrNotVirtual) || !strings.Contains(err.Error(), other.Root()) {
		t.Fatalf("NewWorkspace with another host directory: %v, want ErrNotVirtual naming it", err)
	}
	st := must[cache.Status](t)(v.Status(ctx))
	if st.LastUploadBytes > 2<<20 {
		t.Fatalf("a one-byte edit uploaded %d bytes: the whole file was copied up", st.LastUploadBytes)
	}

	// A remount, on the same cache and on a fresh one, sees the same.
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{cacheDir, ""} {
		_, hd2, err := Prepare(ctx, repo, "ws", Base{}, "testhost", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		v2 := openVol(t, repo, branch, dir, hd2)
		w2 := must[*Workspace](t)(NewWorkspace(ctx, v2, hd2))
		if got := changeList(must[[]Change](t)(w2.Diff(ctx))); !reflect.DeepEqual(got, wantDiff) {
			t.Fatalf("diff after remount = %v", got)
		}
		if got := read(t, v2, "lib/big.bin"); !bytes.Equal(got, want) {
			t.Fatal("big.bin after remount")
		}
		if dir == "" {
			v, w = v2, w2
		} else if err := v2.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Discard one path: it shows the base again at once.
	if _, err := w.Discard(ctx, []string{"docs/readme"}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, v, "docs/readme"); string(got) != "read me\n" {
		t.Fatalf("discarded file reads %q", got)
	}
	wantDiff = []string{"A new.txt", "M lib/big.bin", "M lib/main.go", "R src -> lib"}
	if got := changeList(must[[]Change](t)(w.Diff(ctx))); !reflect.DeepEqual(got, wantDiff) {
		t.Fatalf("diff after discard = %v", got)
	}
	if d := posixtest.Diff(before, hostTree(t, host)); len(d) > 0 {
		t.Fatalf("the host directory changed before commit: %v", d)
	}

	// Commit everything: the host directory now has the changes.
	res, err := w.Commit(ctx, nil, "accept", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 4 || res.Pending != 0 {
		t.Fatalf("commit result %+v", res)
	}
	for p, data := range map[string][]byte{"new.txt": []byte("new\n"), "lib/main.go": []byte("package lib\n"), "lib/big.bin": want,
		"lib/deep/x/y.txt": []byte("deep\n"), "docs/readme": []byte("read me\n")} {
		got, err := os.ReadFile(filepath.Join(host, p))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("host %s after commit: %v: %q", p, err, got[:min(len(got), 40)])
		}
	}
	if _, err := os.Stat(filepath.Join(host, "src")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("renamed directory still at its old host path: %v", err)
	}
	if got := must[[]Change](t)(w.Diff(ctx)); len(got) != 0 {
		t.Fatalf("diff after commit = %v", changeList(got))
	}
	if got := read(t, v, "lib/big.bin"); !bytes.Equal(got, want) {
		t.Fatal("big.bin after commit")
	}
	// The workspace reads through to the host again.
	if err := os.WriteFile(filepath.Join(host, "a.txt"), []byte("changed on the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read(t, v, "a.txt"); !strings.HasPrefix(string(got), "changed on the host") {
		t.Fatalf("an untouched base file does not follow the host: %q", got)
	}
}

// TestCommitBase: a workspace over a branch: diff, commit of some paths to
// the branch, discard of the rest.
func TestCommitBase(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	mainVol := openVol(t, repo, "main", "", nil)
	write(t, mainVol, "keep.txt", []byte("keep"), 0)
	write(t, mainVol, "edit.txt", []byte("v1"), 0)
	if err := mainVol.Close(ctx); err != nil {
		t.Fatal(err)
	}
	branch, _, err := Prepare(ctx, repo, "agent", Base{Ref: "main"}, "h", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v := openVol(t, repo, branch, "", nil)
	w := must[*Workspace](t)(NewWorkspace(ctx, v, nil))
	write(t, v, "edit.txt", []byte("v2"), 0)
	write(t, v, "junk.txt", []byte("junk"), 0)
	root := must[cache.Attr](t)(lookupPath(ctx, v, ""))
	if err := v.Unlink(ctx, root.Ino, "keep.txt"); err != nil {
		t.Fatal(err)
	}
	want := []string{"A junk.txt", "D keep.txt", "M edit.txt"}
	if got := changeList(must[[]Change](t)(w.Diff(ctx))); !reflect.DeepEqual(got, want) {
		t.Fatalf("diff = %v, want %v", got, want)
	}
	res, err := w.Commit(ctx, []string{"edit.txt"}, "take the edit", "after-edit", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || res.Pending != 2 {
		t.Fatalf("commit result %+v", res)
	}
	want = []string{"A junk.txt", "D keep.txt"}
	if got := changeList(must[[]Change](t)(w.Diff(ctx))); !reflect.DeepEqual(got, want) {
		t.Fatalf("diff after a partial commit = %v", got)
	}
	m := openVol(t, repo, "main", "", nil)
	if got := read(t, m, "edit.txt"); string(got) != "v2" {
		t.Fatalf("main's edit.txt = %q", got)
	}
	if got := read(t, m, "keep.txt"); string(got) != "keep" {
		t.Fatalf("main lost keep.txt: %q", got)
	}
	if _, err := lookupPath(ctx, m, "junk.txt"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("main got junk.txt: %v", err)
	}
	if _, err := repo.GetSnapshot(ctx, "after-edit"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Discard(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := must[[]Change](t)(w.Diff(ctx)); len(got) != 0 {
		t.Fatalf("diff after discard = %v", changeList(got))
	}
	if got := read(t, v, "keep.txt"); string(got) != "keep" {
		t.Fatalf("keep.txt after discard = %q", got)
	}
	// Another change on main to a path the workspace also changed: conflict.
	write(t, m, "edit.txt", []byte("v3 on main"), 0)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	write(t, v, "edit.txt", []byte("v3 in the workspace"), 0)
	if _, err := w.Commit(ctx, nil, "", "", false); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting commit: %v", err)
	}
}
