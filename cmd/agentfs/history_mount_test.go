package main

// Issue 7 over real mounts: the history commands given a MOUNTPOINT, run
// against mounts served by separate processes (fs/fstest). The engine-level
// behaviour (round trips, forks, gc races, fsck) is tested in
// internal/snapshottest and snapshot/; these check what only a live kernel
// mount shows: a consistent save of what was written through the kernel, a
// restore the kernel sees at once, forks mounted side by side, gc and fsck
// through the mount's server, and a read-only follower.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/snapshot"
)

// mustAgentfs runs an agentfs subcommand with m's environment and fails t
// if it fails.
func mustAgentfs(t *testing.T, m *fstest.Mount, args ...string) string {
	t.Helper()
	out, err := m.Agentfs(args...)
	if err != nil {
		t.Fatalf("agentfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// manifest is the manifest of the tree at dir.
func manifest(t *testing.T, dir string) posixtest.Manifest {
	t.Helper()
	m, err := posixtest.ManifestOf(dir, posixtest.ManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameTree fails t if the trees differ in anything but access times.
func sameTree(t *testing.T, what string, got, want posixtest.Manifest) {
	t.Helper()
	if d := posixtest.Diff(want, got, posixtest.IgnoreAtime); len(d) > 0 {
		t.Fatalf("%s differs:\n%s", what, strings.Join(d, "\n"))
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// storeDir is the directory of a file:// store URL.
func storeDir(t *testing.T, url string) string {
	t.Helper()
	dir, ok := strings.CutPrefix(url, "file://")
	if !ok {
		t.Fatalf("%s is not a file:// URL", url)
	}
	return dir
}

// storeBytes sums the sizes of the objects of a file:// store.
func storeBytes(t *testing.T, url string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(storeDir(t, url), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// exitCode returns the exit status of a failed agentfs command (0 for nil).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

var autoRE = regexp.MustCompile(`is snapshot (auto-pre-restore-\S+); undo with ` + "`agentfs snapshot restore (\\S+) (\\S+)`")

// TestSnapshotLiveMount: a snapshot of a live mount is a consistent point of
// what was written through the kernel; a restore changes the live mount in
// place and keeps the state before as an automatic snapshot, itself
// restorable; "live" can be diffed.
func TestSnapshotLiveMount(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=-1s"}})
	if err := posixtest.Populate(m.Dir); err != nil {
		t.Fatal(err)
	}
	saved := manifest(t, m.Dir)
	var auto string
	var broken posixtest.Manifest
	t.Run("SaveFlushesFirst", func(t *testing.T) {
		// No checkpoint ran: only the save's own commit holds the tree.
		out := mustAgentfs(t, m, "snapshot", "save", m.Dir, "good", "-m", "all tests pass")
		if !strings.Contains(out, "saved snapshot good of main@") {
			t.Fatalf("save: %s", out)
		}
		if out, err := m.Agentfs("snapshot", "save", m.Dir, "good"); err == nil || !strings.Contains(out, "already exists") {
			t.Fatalf("duplicate save: %v\n%s", err, out)
		}
		if out, err := m.Agentfs("snapshot", "save", m.Dir, "bad/name"); err == nil || !strings.Contains(out, "invalid name") {
			t.Fatalf("bad name: %v\n%s", err, out)
		}
		// The snapshot, read from the store by a fresh read-only mount of it
		// on a branch forked from it, is what was written.
		mustAgentfs(t, m, "fork", m.Dir, "good", "check-good")
		ro := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true, Args: []string{"--branch", "check-good"}})
		sameTree(t, "snapshot good, mounted", manifest(t, ro.Dir), saved)
		ro.Unmount(t)
	})
	t.Run("DiffLive", func(t *testing.T) {
		root := filepath.Join(m.Dir, posixtest.PopulatedDir)
		writeFile(t, filepath.Join(root, "small.txt"), []byte("broken by the agent\n"))
		writeFile(t, filepath.Join(m.Dir, "junk", "tmp.txt"), []byte("junk"))
		if err := os.Remove(filepath.Join(root, "empty")); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setxattr(filepath.Join(m.Dir, "junk", "tmp.txt"), "user.tag", []byte("v2"), 0); err != nil {
			t.Fatal(err)
		}
		broken = manifest(t, m.Dir)
		var d struct {
			A, B    string
			Changes []histdiff.Change
		}
		if err := json.Unmarshal([]byte(mustAgentfs(t, m, "snapshot", "diff", m.Dir, "good", "live", "--json")), &d); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range d.Changes {
			got = append(got, string(c.Letter())+" "+c.Path)
		}
		// dir/hard-link-to-small is a second name of small.txt.
		want := []string{"A junk", "A junk/tmp.txt", "M " + posixtest.PopulatedDir + "/dir/hard-link-to-small",
			"D " + posixtest.PopulatedDir + "/empty", "M " + posixtest.PopulatedDir + "/small.txt"}
		if strings.Join(got, ",") != strings.Join(want, ",") || !strings.HasPrefix(d.B, "live (main@") {
			t.Fatalf("diff good live: %s / %v, want %v", d.B, got, want)
		}
		out := mustAgentfs(t, m, "snapshot", "diff", m.Dir, "good", "live", "-p")
		if !strings.Contains(out, "+broken by the agent") {
			t.Errorf("diff -p:\n%s", out)
		}
	})
	t.Run("RestoreInPlace", func(t *testing.T) {
		out := mustAgentfs(t, m, "snapshot", "restore", m.Dir, "good")
		mt := autoRE.FindStringSubmatch(out)
		if !strings.Contains(out, "restored "+m.Dir+" to good") || mt == nil || mt[2] != m.Dir || mt[3] != mt[1] {
			t.Fatalf("restore: %s", out)
		}
		auto = mt[1]
		sameTree(t, "live mount after restore", manifest(t, m.Dir), saved)
		if out := mustAgentfs(t, m, "snapshot", "diff", m.Dir, "good", "live"); out != "" {
			t.Errorf("live differs from good after the restore:\n%s", out)
		}
	})
	t.Run("AutoSnapshotRestorable", func(t *testing.T) {
		var list []snapshotJSON
		if err := json.Unmarshal([]byte(mustAgentfs(t, m, "snapshot", "list", m.Dir, "--json")), &list); err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[1].Name != auto || list[1].Kind != snapshot.KindAuto {
			t.Fatalf("list: %+v", list)
		}
		mustAgentfs(t, m, "snapshot", "restore", m.Dir, auto)
		sameTree(t, "live mount after undoing the restore", manifest(t, m.Dir), broken)
	})
	t.Run("DurableElsewhere", func(t *testing.T) {
		// A fresh mount with a fresh cache reads the undone state from the
		// store: the restores were commits, not local changes.
		fresh := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true})
		sameTree(t, "fresh mount", manifest(t, fresh.Dir), broken)
		if out := mustAgentfs(t, m, "fsck", m.Dir, "--full"); !strings.Contains(out, "no problems found") {
			t.Errorf("fsck: %s", out)
		}
	})
}

// TestForksMountedAtOnce: three forks of one snapshot, mounted at the same
// time by three servers, each changing different files: each sees only its
// own changes, the base is unchanged, and the store grows by the changes
// only.
func TestForksMountedAtOnce(t *testing.T) {
	base := fstest.Start(t, fstest.Options{})
	shared := randomBytes(t, 8<<20)
	writeFile(t, filepath.Join(base.Dir, "data", "shared.bin"), shared)
	for i := range 3 {
		writeFile(t, filepath.Join(base.Dir, "src", fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("base %d\n", i)))
	}
	mustAgentfs(t, base, "snapshot", "save", base.Dir, "base")
	baseManifest := manifest(t, base.Dir)
	before := storeBytes(t, base.URL)

	forks := make([]*fstest.Mount, 3)
	for i := range forks {
		name := fmt.Sprintf("attempt-%d", i)
		if out := mustAgentfs(t, base, "fork", base.Dir, "base", name); !strings.Contains(out, "forked base") {
			t.Fatalf("fork: %s", out)
		}
		forks[i] = fstest.Start(t, fstest.Options{URL: base.URL, Args: []string{"--branch", name}})
	}
	const changeSize = 1 << 20
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, f := range forks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, changeSize)
			if _, err := rand.Read(b); err != nil {
				errs[i] = err
				return
			}
			if err := os.WriteFile(filepath.Join(f.Dir, fmt.Sprintf("mine-%d.bin", i)), b, 0o644); err != nil {
				errs[i] = err
				return
			}
			errs[i] = os.WriteFile(filepath.Join(f.Dir, "src", fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("changed by %d\n", i)), 0o644)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		f.Sync(t)
	}
	t.Run("EachSeesOnlyItsOwn", func(t *testing.T) {
		for i, f := range forks {
			for j := range 3 {
				_, err := os.Stat(filepath.Join(f.Dir, fmt.Sprintf("mine-%d.bin", j)))
				if (i == j) != (err == nil) {
					t.Errorf("fork %d: mine-%d.bin: %v", i, j, err)
				}
				got, err := os.ReadFile(filepath.Join(f.Dir, "src", fmt.Sprintf("f%d.txt", j)))
				want := fmt.Sprintf("base %d\n", j)
				if i == j {
					want = fmt.Sprintf("changed by %d\n", j)
				}
				if err != nil || string(got) != want {
					t.Errorf("fork %d: src/f%d.txt = %q, %v; want %q", i, j, got, err, want)
				}
			}
			if got, err := os.ReadFile(filepath.Join(f.Dir, "data", "shared.bin")); err != nil || !bytes.Equal(got, shared) {
				t.Errorf("fork %d: shared data differs: %v", i, err)
			}
		}
	})
	t.Run("BaseUnchanged", func(t *testing.T) {
		sameTree(t, "base mount", manifest(t, base.Dir), baseManifest)
		if out := mustAgentfs(t, base, "snapshot", "diff", base.Dir, "base", "live"); out != "" {
			t.Errorf("base moved:\n%s", out)
		}
		out := mustAgentfs(t, base, "snapshot", "diff", base.Dir, "base", "attempt-1", "--stat")
		if !strings.Contains(out, "1 added, 1 modified, 0 deleted") {
			t.Errorf("diff base attempt-1:\n%s", out)
		}
	})
	t.Run("StorageGrowsByTheChangesOnly", func(t *testing.T) {
		grown := storeBytes(t, base.URL) - before
		// Three 1 MiB random files (incompressible) plus trees, commits,
		// leases and refs; the 8 MiB shared file is never copied.
		if grown < 3*changeSize || grown > 3*changeSize+512<<10 {
			t.Errorf("the store grew by %d bytes for %d bytes of changes", grown, 3*changeSize)
		}
		t.Logf("store grew by %d bytes for 3 forks writing %d bytes each (shared data: %d bytes)", grown, changeSize, len(shared))
	})
}

// TestGCThroughMount: gc run by a mount's server while a writer writes
// through the kernel never removes what is reachable; after `snapshot rm`
// it frees the bytes only that snapshot held.
func TestGCThroughMount(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=200ms"}})
	t.Run("RacingALiveWriter", func(t *testing.T) {
		var written sync.Map
		var stop atomic.Bool
		var werr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; !stop.Load(); i++ {
				p := filepath.Join(m.Dir, "w", fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%d", i))
				data := []byte(fmt.Sprintf("%d %s", i, strings.Repeat("x", i%5000)))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					werr = err
					return
				}
				if err := os.WriteFile(p, data, 0o644); err != nil {
					werr = err
					return
				}
				written.Store(p, data)
				if i%10 == 9 {
					// Garbage for gc: a file rewritten, its old chunks
					// unreferenced once the commits keeping them are pruned.
					if err := os.Remove(p); err != nil {
						werr = err
						return
					}
					written.Delete(p)
				}
			}
		}()
		var pruned, swept int
		for range 6 {
			time.Sleep(time.Second)
			out, err := m.Agentfs("gc", m.Dir, "--keep-last", "1", "--grace", "2s", "--json")
			var rep snapshot.GCReport
			if err == nil {
				err = json.Unmarshal([]byte(out), &rep)
			}
			if err != nil {
				stop.Store(true)
				<-done
				t.Fatalf("gc: %v\n%s", err, out)
			}
			pruned += rep.CommitsPruned
			swept += rep.PacksSwept
		}
		stop.Store(true)
		<-done
		if werr != nil {
			t.Fatal(werr)
		}
		t.Logf("gc racing the writer pruned %d commits and deleted %d packs", pruned, swept)
		if pruned == 0 || swept == 0 {
			t.Errorf("gc deleted nothing while racing the writer (%d commits, %d packs): the race was not exercised", pruned, swept)
		}
		m.Sync(t)
		if out, err := m.Agentfs("fsck", m.Dir, "--full"); err != nil || !strings.Contains(out, "no problems found") {
			t.Fatalf("fsck after gc racing a writer: %v\n%s", err, out)
		}
		// Every file is readable, here and from the store by a fresh mount.
		fresh := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true})
		n := 0
		written.Range(func(k, v any) bool {
			n++
			rel, _ := filepath.Rel(m.Dir, k.(string))
			for _, dir := range []string{m.Dir, fresh.Dir} {
				if got, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || !bytes.Equal(got, v.([]byte)) {
					t.Errorf("%s in %s: %v", rel, dir, err)
					return false
				}
			}
			return true
		})
		if n < 20 {
			t.Errorf("the writer wrote only %d files", n)
		}
	})
	t.Run("AfterSnapshotRmFreesUniqueBytes", func(t *testing.T) {
		const size = 2 << 20
		writeFile(t, filepath.Join(m.Dir, "only-in-s1.bin"), randomBytes(t, size))
		mustAgentfs(t, m, "snapshot", "save", m.Dir, "s1")
		if err := os.Remove(filepath.Join(m.Dir, "only-in-s1.bin")); err != nil {
			t.Fatal(err)
		}
		m.Sync(t)
		time.Sleep(3500 * time.Millisecond) // past the grace period below (2 s + gc's 1 s of clock slack)
		// While s1 exists, gc keeps its data however old; it prunes the
		// commits that held the file too, so only s1 holds it then.
		var rep snapshot.GCReport
		if err := json.Unmarshal([]byte(mustAgentfs(t, m, "gc", m.Dir, "--keep-last", "1", "--grace", "2s", "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		var list []snapshotJSON
		if err := json.Unmarshal([]byte(mustAgentfs(t, m, "snapshot", "list", m.Dir, "--json")), &list); err != nil {
			t.Fatal(err)
		}
		var unique int64 = -1
		for _, s := range list {
			if s.Name == "s1" && s.UniqueBytes != nil {
				unique = *s.UniqueBytes
			}
		}
		if unique < size {
			t.Fatalf("s1's unique bytes %d, want at least %d: %+v", unique, size, list)
		}
		before := storeBytes(t, m.URL)
		mustAgentfs(t, m, "snapshot", "rm", m.Dir, "s1")
		if err := json.Unmarshal([]byte(mustAgentfs(t, m, "gc", m.Dir, "--keep-last", "1", "--grace", "2s", "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		freed := before - storeBytes(t, m.URL)
		if rep.BytesFreed < size || freed < size {
			t.Errorf("gc after rm freed %d bytes (report: %d), s1 held %d unique", freed, rep.BytesFreed, unique)
		}
		if out, err := m.Agentfs("fsck", m.Dir); err != nil {
			t.Errorf("fsck: %v\n%s", err, out)
		}
	})
}

// TestFsckThroughMount: fsck run by the mount's server finds a pack
// deleted behind its back and a chunk whose bytes were flipped, names the
// paths they affect, and exits 1.
func TestFsckThroughMount(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	// Each file is synced on its own, so each lands in a pack of its own.
	writeFile(t, filepath.Join(m.Dir, "lost", "gone.bin"), randomBytes(t, 300<<10))
	m.Sync(t)
	writeFile(t, filepath.Join(m.Dir, "rot", "flipped.bin"), randomBytes(t, 300<<10))
	m.Sync(t)
	writeFile(t, filepath.Join(m.Dir, "fine.txt"), []byte("fine\n"))
	m.Sync(t)

	ctx := context.Background()
	store, err := blobstore.Open(ctx, m.URL, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	repo, err := snapshot.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	head, err := repo.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	chunkOf := func(p string) snapshot.BlobRef {
		e, err := repo.LookupPath(ctx, snapshot.CommitTree(head), p)
		if err != nil || len(e.Chunks) == 0 {
			t.Fatalf("%s: %+v %v", p, e, err)
		}
		return e.Chunks[0].Ref
	}
	gone, flipped := chunkOf("lost/gone.bin"), chunkOf("rot/flipped.bin")
	if gone.Pack == flipped.Pack {
		t.Fatal("both files landed in one pack")
	}
	dir := storeDir(t, m.URL)
	if err := os.Remove(filepath.Join(dir, snapshot.PackKey(gone.Pack))); err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(dir, snapshot.PackKey(flipped.Pack))
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	b[flipped.Offset+uint64(flipped.Length)/2] ^= 0xff
	if err := os.WriteFile(pack, b, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := m.Agentfs("fsck", m.Dir, "--full")
	if exitCode(err) != 1 {
		t.Fatalf("fsck --full exit %d:\n%s", exitCode(err), out)
	}
	for _, want := range []string{"pack " + gone.Pack.String(), "lost/gone.bin  (in main@", "rot/flipped.bin  (in main@", "2 problems found"} {
		if !strings.Contains(out, want) {
			t.Errorf("fsck --full output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "fine.txt") {
		t.Errorf("fsck names an intact file:\n%s", out)
	}
	// Without --full only the missing pack shows.
	out, err = m.Agentfs("fsck", m.Dir)
	if exitCode(err) != 1 || !strings.Contains(out, "lost/gone.bin") || strings.Contains(out, "rot/flipped.bin") {
		t.Errorf("fsck (structure) exit %d:\n%s", exitCode(err), out)
	}
}

// TestReadOnlyFollower: a read-only mount of a branch that a writer mount
// changes shows each synced change within seconds (the engine follows the
// branch head and tells the kernel what changed).
func TestReadOnlyFollower(t *testing.T) {
	w := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=-1s"}})
	writeFile(t, filepath.Join(w.Dir, "doc.txt"), []byte("version 1\n"))
	writeFile(t, filepath.Join(w.Dir, "old.txt"), []byte("old\n"))
	w.Sync(t)
	ro := fstest.Start(t, fstest.Options{URL: w.URL, ReadOnly: true})
	// Read everything once so the kernel caches it.
	if got, err := os.ReadFile(filepath.Join(ro.Dir, "doc.txt")); err != nil || string(got) != "version 1\n" {
		t.Fatalf("follower before: %q %v", got, err)
	}
	if _, err := os.ReadDir(ro.Dir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.Dir, "doc.txt"), []byte("version 2, longer\n"))
	writeFile(t, filepath.Join(w.Dir, "new", "file.txt"), []byte("new\n"))
	if err := os.Remove(filepath.Join(w.Dir, "old.txt")); err != nil {
		t.Fatal(err)
	}
	w.Sync(t)
	synced := time.Now()
	want := manifest(t, w.Dir)
	var d []string
	for time.Since(synced) < 20*time.Second {
		got, err := posixtest.ManifestOf(ro.Dir, posixtest.ManifestOptions{})
		if err == nil {
			if d = posixtest.Diff(want, got, posixtest.IgnoreAtime); len(d) == 0 {
				t.Logf("the follower showed the synced changes after %v", time.Since(synced).Round(10*time.Millisecond))
				return
			}
		} else {
			d = []string{err.Error()}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the read-only follower did not show the writer's synced changes within 20 s:\n%s", strings.Join(d, "\n"))
}
