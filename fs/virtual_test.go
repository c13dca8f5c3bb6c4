package fs_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/overlay"
)

// virtualExclusions are the POSIX checks a virtual mount does not pass,
// with the reason. Keep it empty unless the overlay cannot do something.
var virtualExclusions = map[string]string{}

// manifestOf walks dir and fails t on error.
func manifestOf(t *testing.T, dir string) posixtest.Manifest {
	t.Helper()
	m, err := posixtest.ManifestOf(dir, posixtest.ManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// wantSame fails t with the differences between two manifests.
func wantSame(t *testing.T, what string, a, b posixtest.Manifest, ignore ...posixtest.Ignore) {
	t.Helper()
	if d := posixtest.Diff(a, b, ignore...); len(d) > 0 {
		t.Errorf("%s (%d differences):\n%s", what, len(d), strings.Join(d[:min(len(d), 40)], "\n"))
	}
}

// hostBase fills a new host directory with the workspace of
// writeWorkspace and returns it with its manifest.
func hostBase(t *testing.T) (string, posixtest.Manifest) {
	t.Helper()
	host := filepath.Join(t.TempDir(), "host")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	writeWorkspace(t, host)
	return host, manifestOf(t, host)
}

// TestPOSIXVirtualHost runs the POSIX suite over a virtual mount of a host
// directory: the mount first shows the directory attribute for attribute,
// and the directory is byte- and attribute-identical (times included)
// after everything, remount included.
func TestPOSIXVirtualHost(t *testing.T) {
	host, before := hostBase(t)
	m := fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", host}})
	t.Run("ReadsThrough", func(t *testing.T) {
		// Host hard links are not tracked: each name is its own file.
		wantSame(t, "the virtual mount differs from its host directory", before, manifestOf(t, m.Dir), posixtest.IgnoreNlink)
	})
	posixtest.Run(t, m.Dir, posixtest.Options{Exclude: virtualExclusions})
	m.Unmount(t)
	wantSame(t, "the host directory changed", before, manifestOf(t, host))
}

// TestPOSIXVirtualSnapshot runs the POSIX suite over a virtual mount of a
// snapshot, after checking that the mount shows the snapshot exactly, and
// that the snapshot's branch is untouched afterwards.
func TestPOSIXVirtualSnapshot(t *testing.T) {
	plain := fstest.Start(t, fstest.Options{})
	writeWorkspace(t, plain.Dir)
	want := manifestOf(t, plain.Dir)
	plain.Unmount(t)
	if out, err := plain.Agentfs("snapshot", "save", plain.URL, "base"); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	m := fstest.Start(t, fstest.Options{URL: plain.URL, Dir: filepath.Join(t.TempDir(), "virtual"),
		Args: []string{"--virtual", "--base", "snapshot:base"}})
	t.Run("ReadsThrough", func(t *testing.T) {
		wantSame(t, "the virtual mount differs from its snapshot", want, manifestOf(t, m.Dir), posixtest.IgnoreAtime)
	})
	for _, name := range []string{"ROTree", "ROReads", "ROFileHandles"} {
		t.Run(name, func(t *testing.T) { posixtest.ReadOnlyChecks[name](t, m.Dir) })
	}
	posixtest.Run(t, m.Dir, posixtest.Options{Exclude: virtualExclusions})
	m.Unmount(t)
	again := fstest.Start(t, fstest.Options{URL: plain.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "ro")})
	wantSame(t, "the base branch changed", want, manifestOf(t, again.Dir), posixtest.IgnoreAtime)
}

// virtualClient returns the control client of a virtual mount.
func virtualClient(t *testing.T, m *fstest.Mount) *control.Client {
	t.Helper()
	c := m.Client(t)
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Virtual == nil {
		t.Fatalf("%s is not a virtual mount: %+v", m.Dir, info)
	}
	return c
}

// writeFiles writes path → content files below dir, creating directories.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(dir, p)
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(data), 0o644))
	}
}

// readFile returns the content of dir/p, failing t on error.
func readFile(t *testing.T, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// changeStrings lists changes as "OP path" lines (with "from -> " for
// renames), in diff's order.
func changeStrings(cs []overlay.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
}

func diffOf(t *testing.T, c *control.Client) []overlay.Change {
	t.Helper()
	rep, err := c.VirtualDiff(context.Background(), control.VirtualDiffRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []overlay.Change
	for _, fc := range rep.Changes {
		out = append(out, fc.Change)
	}
	return out
}

func wantChanges(t *testing.T, what string, got []overlay.Change, want ...string) {
	t.Helper()
	if g := changeStrings(got); !slices.Equal(g, want) {
		t.Fatalf("%s: diff =\n%s\nwant\n%s", what, strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

var projectFiles = map[string]string{
	"README.md": "# project\n", "src/main.go": "package main\n\nfunc main() {}\n", "src/util.go": "package main\n",
	"src/deep/x.txt": "x\n", "src/deep/y.txt": "y\n", "docs/guide.md": "guide\n",
}

// TestVirtualRenameBaseDir renames a non-empty base directory, edits
// inside it (a modification, an addition, a deletion, a rename), checks
// that the untouched files keep reading through, the diff, and that the
// commit gives the base the same tree — over a host directory (untouched
// until the commit) and over a snapshot.
func TestVirtualRenameBaseDir(t *testing.T) {
	edit := func(t *testing.T, mnt string) {
		must(t, os.Rename(filepath.Join(mnt, "src"), filepath.Join(mnt, "lib")))
		must(t, os.WriteFile(filepath.Join(mnt, "lib", "main.go"), []byte("package lib\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(mnt, "lib", "new.go"), []byte("package lib // new\n"), 0o644))
		must(t, os.Remove(filepath.Join(mnt, "lib", "deep", "y.txt")))
		must(t, os.Rename(filepath.Join(mnt, "lib", "util.go"), filepath.Join(mnt, "lib", "helpers.go")))
		if got := readFile(t, mnt, "lib/deep/x.txt"); got != "x\n" {
			t.Fatalf("lib/deep/x.txt reads %q after the rename", got)
		}
		if _, err := os.Stat(filepath.Join(mnt, "src")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("src after the rename: %v", err)
		}
	}
	t.Run("Host", func(t *testing.T) {
		host := filepath.Join(t.TempDir(), "host")
		writeFiles(t, host, projectFiles)
		before := manifestOf(t, host)
		m := fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", host}})
		c := virtualClient(t, m)
		edit(t, m.Dir)
		wantChanges(t, "after the edits", diffOf(t, c),
			"R src -> lib", "D lib/deep/y.txt", "R src/util.go -> lib/helpers.go", "M lib/main.go", "A lib/new.go")
		wantSame(t, "the host directory changed before the commit", before, manifestOf(t, host))
		live := manifestOf(t, m.Dir)
		if _, err := c.Commit(context.Background(), control.CommitRequest{Message: "rename"}); err != nil {
			t.Fatal(err)
		}
		wantSame(t, "the host directory after the commit is not the workspace", live, manifestOf(t, host), timesIgnored, posixtest.IgnoreNlink)
		wantChanges(t, "after the commit", diffOf(t, c))
		wantSame(t, "the workspace changed with the commit", live, manifestOf(t, m.Dir), timesIgnored, posixtest.IgnoreNlink)
	})
	t.Run("HostIntoNewDirectory", func(t *testing.T) {
		// A base directory moved into a new one, and a new directory in
		// its old place: the commit must move the tree, not drop it.
		host := filepath.Join(t.TempDir(), "host")
		writeFiles(t, host, projectFiles)
		before := manifestOf(t, host)
		m := fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", host}})
		c := virtualClient(t, m)
		must(t, os.Mkdir(filepath.Join(m.Dir, "new"), 0o755))
		must(t, os.Rename(filepath.Join(m.Dir, "src"), filepath.Join(m.Dir, "new", "src")))
		writeFiles(t, m.Dir, map[string]string{"src/fresh.go": "package fresh\n"})
		wantChanges(t, "after the edits", diffOf(t, c), "A new", "R src -> new/src", "A src", "A src/fresh.go")
		wantSame(t, "the host directory changed before the commit", before, manifestOf(t, host))
		live := manifestOf(t, m.Dir)
		if _, err := c.Commit(context.Background(), control.CommitRequest{}); err != nil {
			t.Fatal(err)
		}
		wantSame(t, "the host directory after the commit is not the workspace", live, manifestOf(t, host), timesIgnored, posixtest.IgnoreNlink)
		wantChanges(t, "after the commit", diffOf(t, c))
	})
	t.Run("Snapshot", func(t *testing.T) {
		plain := fstest.Start(t, fstest.Options{})
		writeFiles(t, plain.Dir, projectFiles)
		plain.Unmount(t)
		if out, err := plain.Agentfs("snapshot", "save", plain.URL, "base"); err != nil {
			t.Fatalf("snapshot save: %v\n%s", err, out)
		}
		m := fstest.Start(t, fstest.Options{URL: plain.URL, Dir: filepath.Join(t.TempDir(), "v"), Args: []string{"--virtual", "--base", "snapshot:base"}})
		c := virtualClient(t, m)
		edit(t, m.Dir)
		wantChanges(t, "after the edits", diffOf(t, c),
			"A lib", "A lib/deep", "A lib/deep/x.txt", "A lib/helpers.go", "A lib/main.go", "A lib/new.go",
			"D src", "D src/deep", "D src/deep/x.txt", "D src/deep/y.txt", "D src/main.go", "D src/util.go")
		live := manifestOf(t, m.Dir)
		res, err := c.Commit(context.Background(), control.CommitRequest{Message: "rename"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Commit == nil || res.Commit.Branch != "main" {
			t.Fatalf("commit result %+v", res)
		}
		wantChanges(t, "after the commit", diffOf(t, c))
		ro := fstest.Start(t, fstest.Options{URL: plain.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "ro")})
		wantSame(t, "main after the commit is not the workspace", live, manifestOf(t, ro.Dir), posixtest.IgnoreAtime)
	})
}

// TestVirtualDiscardPath discards one path while the others stay pending:
// the mount shows the base there at once (the kernel's caches included),
// then discards a renamed directory, then everything.
func TestVirtualDiscardPath(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host")
	writeFiles(t, host, projectFiles)
	before := manifestOf(t, host)
	m := fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", host}})
	c := virtualClient(t, m)
	must(t, os.WriteFile(filepath.Join(m.Dir, "README.md"), []byte("# changed\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(m.Dir, "src", "util.go"), []byte("package main // changed\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(m.Dir, "notes.txt"), []byte("notes\n"), 0o644))
	must(t, os.Remove(filepath.Join(m.Dir, "docs", "guide.md")))
	must(t, os.Rename(filepath.Join(m.Dir, "src", "deep"), filepath.Join(m.Dir, "deeper")))
	// The kernel caches what it saw: the discard must make it forget.
	_ = readFile(t, m.Dir, "README.md")
	f, err := os.Open(filepath.Join(m.Dir, "src", "util.go"))
	must(t, err)
	defer f.Close()
	wantChanges(t, "after the edits", diffOf(t, c),
		"M README.md", "R src/deep -> deeper", "D docs/guide.md", "A notes.txt", "M src/util.go")

	if _, err := c.Discard(context.Background(), control.DiscardRequest{Paths: []string{"src/util.go"}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, m.Dir, "src/util.go"); got != "package main\n" {
		t.Fatalf("src/util.go after its discard reads %q", got)
	}
	if st, err := os.Stat(filepath.Join(m.Dir, "src", "util.go")); err != nil || st.Mode().Perm() != 0o644 || st.Size() != int64(len("package main\n")) {
		t.Fatalf("src/util.go after its discard: %v %v", st, err)
	}
	if got := readFile(t, m.Dir, "README.md"); got != "# changed\n" {
		t.Fatalf("README.md, still pending, reads %q", got)
	}
	wantChanges(t, "after discarding src/util.go", diffOf(t, c),
		"M README.md", "R src/deep -> deeper", "D docs/guide.md", "A notes.txt")

	// A rename is discarded by its new path: the directory is back.
	if _, err := c.Discard(context.Background(), control.DiscardRequest{Paths: []string{"deeper"}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, m.Dir, "src/deep/x.txt"); got != "x\n" {
		t.Fatalf("src/deep/x.txt after discarding the rename reads %q", got)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "deeper")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("deeper after discarding the rename: %v", err)
	}
	wantChanges(t, "after discarding deeper", diffOf(t, c), "M README.md", "D docs/guide.md", "A notes.txt")
	wantSame(t, "the host directory changed", before, manifestOf(t, host))

	if _, err := c.Discard(context.Background(), control.DiscardRequest{}); err != nil {
		t.Fatal(err)
	}
	wantChanges(t, "after discarding everything", diffOf(t, c))
	wantSame(t, "the workspace after discarding everything is not its base", before, manifestOf(t, m.Dir), posixtest.IgnoreAtime)
	wantSame(t, "the host directory changed", before, manifestOf(t, host))
}

// TestVirtualHostChanges checks what the documented choice says about a
// host directory changed while a virtual mount of it is in use: the mount
// goes on without errors and keeps the agent's changes; diff compares with
// the host as it is; commit refuses to overwrite or delete what the host
// changed since the workspace was created (force overrides it); a remount
// shows the host's current state wherever the agent changed nothing.
func TestVirtualHostChanges(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host")
	writeFiles(t, host, projectFiles)
	m := fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", host}})
	c := virtualClient(t, m)
	_ = readFile(t, m.Dir, "README.md")
	must(t, os.WriteFile(filepath.Join(m.Dir, "src", "main.go"), []byte("package main // agent\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(m.Dir, "src", "util.go"), []byte("package main // agent\n"), 0o644))
	must(t, os.Remove(filepath.Join(m.Dir, "docs", "guide.md")))

	// The host changes: a file the agent changed, one it did not, a new
	// file where the agent works, a file the agent deleted.
	time.Sleep(10 * time.Millisecond) // past the coarse clock's tick
	writeFiles(t, host, map[string]string{"src/main.go": "package main // host\n", "README.md": "# host\n",
		"src/host.go": "package main // host\n", "docs/guide.md": "guide, edited on the host\n"})

	if got := readFile(t, m.Dir, "src/main.go"); got != "package main // agent\n" {
		t.Fatalf("the agent's src/main.go reads %q after the host changed it", got)
	}
	wantChanges(t, "after the host changed", diffOf(t, c), "D docs/guide.md", "D src/host.go", "M src/main.go", "M src/util.go")

	// Only the path the host did not touch commits.
	_, err := c.Commit(context.Background(), control.CommitRequest{})
	if !errors.Is(err, overlay.ErrConflict) {
		t.Fatalf("commit over host changes: %v, want a conflict", err)
	}
	for _, p := range []string{"docs/guide.md", "src/main.go", "src/host.go"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the conflict does not name %s: %v", p, err)
		}
	}
	if strings.Contains(err.Error(), "util.go") {
		t.Errorf("the conflict names src/util.go, which the host did not change: %v", err)
	}
	if got := readFile(t, host, "src/main.go"); got != "package main // host\n" {
		t.Fatalf("a refused commit wrote src/main.go: %q", got)
	}
	if _, err := c.Commit(context.Background(), control.CommitRequest{Paths: []string{"src/util.go"}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, host, "src/util.go"); got != "package main // agent\n" {
		t.Fatalf("host src/util.go after its commit: %q", got)
	}
	// Discarding the listed deletion of the host's new file shows it.
	if _, err := c.Discard(context.Background(), control.DiscardRequest{Paths: []string{"src/host.go"}}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, m.Dir, "src/host.go"); got != "package main // host\n" {
		t.Fatalf("src/host.go after discarding its deletion: %q", got)
	}
	// Force: the workspace wins.
	if _, err := c.Commit(context.Background(), control.CommitRequest{Paths: []string{"src/main.go"}, Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, host, "src/main.go"); got != "package main // agent\n" {
		t.Fatalf("host src/main.go after a forced commit: %q", got)
	}
	wantChanges(t, "after the commits", diffOf(t, c), "D docs/guide.md")

	// A remount shows the host's current state where the agent changed
	// nothing, and keeps the agent's pending deletion.
	m.Unmount(t)
	m2 := fstest.Start(t, fstest.Options{CacheDir: m.CacheDir, Dir: m.Dir, URL: m.URL, Args: []string{"--virtual"}})
	c2 := virtualClient(t, m2)
	if got := readFile(t, m2.Dir, "README.md"); got != "# host\n" {
		t.Fatalf("README.md after a remount reads %q", got)
	}
	wantChanges(t, "after a remount", diffOf(t, c2), "D docs/guide.md")
}

// TestVirtualOneByteEdit: writing one byte into a large host file through
// a virtual mount copies up (and uploads) one chunk, not the file; the
// file reads back right and the host file is untouched.
func TestVirtualOneByteEdit(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host")
	must(t, os.MkdirAll(host, 0o755))
	big := make([]byte, 24<<20) // random: no compression hides a whole-file copy
	_, _ = rand.Read(big)
	must(t, os.WriteFile(filepath.Join(host, "big.bin"), big, 0o644))
	before := manifestOf(t, host)
	m := fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", host, "--checkpoint-interval=-1s"}})
	f, err := os.OpenFile(filepath.Join(m.Dir, "big.bin"), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte{'!'}, 13<<20+5)
	must(t, err)
	must(t, f.Close())
	m.Sync(t)
	st, err := m.Client(t).Status(context.Background())
	must(t, err)
	if st.Volume.LastUploadBytes > 6<<20 {
		t.Errorf("a one-byte edit of a 24 MiB base file uploaded %d bytes: more than one chunk", st.Volume.LastUploadBytes)
	}
	want := slices.Clone(big)
	want[13<<20+5] = '!'
	got, err := os.ReadFile(filepath.Join(m.Dir, "big.bin"))
	must(t, err)
	if !slices.Equal(got, want) {
		t.Fatal("big.bin reads wrong after a one-byte edit")
	}
	wantChanges(t, "after the edit", diffOf(t, virtualClient(t, m)), "M big.bin")
	wantSame(t, "the host directory changed", before, manifestOf(t, host))
}
