package fs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/internal/testenv"
)

// ptArgs mounts with FUSE passthrough on.
var ptArgs = []string{"--tune=passthrough=1"}

// needPassthrough checks that the kernel can do FUSE passthrough for a
// root server (Linux 6.9 or later): a failure under CI=true, a skip
// elsewhere (testenv.Missing).
func needPassthrough(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (FUSE passthrough needs a server running as root)", os.ErrPermission)
	}
	var u unix.Utsname
	_ = unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	var maj, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &maj, &minor); err != nil || maj < 6 || (maj == 6 && minor < 9) {
		testenv.Missing(t, "FUSE passthrough (Linux 6.9 or later)", fmt.Errorf("kernel %s", rel))
	}
}

// opCounter returns a function that counts the FUSE requests of kind op
// the mount has served.
func opCounter(t *testing.T, m *fstest.Mount) func(op string) int64 {
	c := m.Client(t)
	return func(op string) int64 {
		t.Helper()
		return servedCalls(t, c, op)
	}
}

// pattern returns n bytes that differ per position and per seed.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/4096) ^ seed
	}
	return b
}

func preadAll(t *testing.T, f *os.File, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	c, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("read %s: %d bytes, %v", f.Name(), c, err)
	}
	return b[:c]
}

// TestPassthroughReads: a read-only open of a file written through the
// mount (all of it local) is served by the kernel from the data file (no
// READ reaches the server), with the right bytes, O_DIRECT included; a file
// not whole locally (a fresh cache directory) and small inline files are
// read through the server.
func TestPassthroughReads(t *testing.T) {
	needPassthrough(t)
	m := fstest.Start(t, fstest.Options{Args: ptArgs})
	reads := opCounter(t, m)
	p := filepath.Join(m.Dir, "big")
	want := pattern(9<<20+123, 1)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	before := reads("read")
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("passthrough read: %d bytes (want %d), %v", len(got), len(want), err)
	}
	readDirect(t, reads, p, 8192, want[8192:8192+4096])
	if n := reads("read") - before; n != 0 {
		t.Errorf("reads of a file whole locally sent %d READ requests, want 0 (passthrough)", n)
	}
	small := filepath.Join(m.Dir, "small")
	if err := os.WriteFile(small, []byte("inline"), 0o644); err != nil {
		t.Fatal(err)
	}
	before = reads("read")
	if b, err := os.ReadFile(small); err != nil || string(b) != "inline" {
		t.Fatalf("small file: %q, %v", b, err)
	}
	if reads("read") == before {
		t.Errorf("an inline file was read without the server")
	}

	// A fresh cache directory: the file is remote, read through the
	// server (and then cached); once whole, the next open passes through.
	m.Sync(t)
	m.Unmount(t)
	m2 := fstest.Start(t, fstest.Options{URL: m.URL, Args: ptArgs, Dir: filepath.Join(t.TempDir(), "again")})
	reads = opCounter(t, m2)
	p = filepath.Join(m2.Dir, "big")
	before = reads("read")
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read of a remote file: %d bytes, %v", len(got), err)
	}
	if reads("read") == before {
		t.Fatalf("a remote file was read without the server")
	}
	dropCaches(t)
	before = reads("read")
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read of a fetched file: %d bytes, %v", len(got), err)
	}
	if n := reads("read") - before; n != 0 {
		t.Errorf("a file fetched whole sent %d READs, want 0", n)
	}
}

func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off : off+n]
}

// readDirect reads len(want) bytes of file p at off through an O_DIRECT
// descriptor and fails t unless they are want; it returns the READ
// requests the mount served meanwhile (reads, an opCounter). O_DIRECT
// makes it the probe of passthrough: the kernel's page cache (which holds
// what was just written) cannot answer, so without passthrough the read
// reaches the server, and with it none does. off and len(want) must be
// multiples of 4096.
func readDirect(t *testing.T, reads func(op string) int64, p string, off int64, want []byte) int64 {
	t.Helper()
	before := reads("read")
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := alignedBuf(len(want))
	n, err := unix.Pread(fd, buf, off)
	_ = unix.Close(fd)
	if err != nil || n != len(want) || !bytes.Equal(buf, want) {
		t.Fatalf("O_DIRECT read of %s at %d: %d bytes (want %d), %v; same: %v", p, off, n, len(want), err, bytes.Equal(buf[:max(n, 0)], want[:max(n, 0)]))
	}
	return reads("read") - before
}

func dropCaches(t *testing.T) {
	t.Helper()
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0); err != nil {
		t.Logf("drop caches: %v", err)
	}
}

// TestPassthroughModes: the kernel allows one io mode per inode, so every
// combination of opens must still succeed and see the same bytes: a
// writer opened while a passthrough reader is open (its writes reach the
// server and the reader at once), a reader opened while a writer is, many
// of both at once, truncates both ways under a reader; and what a
// shared writable mapping of such a writer changed is kept (checked
// through a fresh cache directory after a sync).
func TestPassthroughModes(t *testing.T) {
	needPassthrough(t)
	m := fstest.Start(t, fstest.Options{Args: append([]string{"--checkpoint-interval=-1s"}, ptArgs...)})
	reads := opCounter(t, m)
	p := filepath.Join(m.Dir, "f")
	want := pattern(12<<20, 2) // three chunks
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	m.Sync(t) // its blocks are clean: only the engine's adoption marks a mapping's change
	check := func(what string, f *os.File) {
		t.Helper()
		if got := preadAll(t, f, len(want)+1); !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, differs from what was written (want %d)", what, len(got), len(want))
		}
	}
	r1, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	before := reads("read")
	check("passthrough reader", r1)
	if n := reads("read") - before; n != 0 {
		t.Fatalf("the first reader sent %d READs: not passthrough", n)
	}

	// A writer while the reader passes through.
	w, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open for writing while a passthrough reader is open: %v", err)
	}
	patch := pattern(100000, 3)
	if _, err := w.WriteAt(patch, 4<<20-5000); err != nil {
		t.Fatal(err)
	}
	copy(want[4<<20-5000:], patch)
	check("passthrough reader after a write", r1)
	check("the writer", w)
	// A shared writable mapping of the writer maps the data file.
	mm, err := unix.Mmap(int(w.Fd()), 9<<20, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(mm[100:], "written through a shared mapping")
	copy(want[9<<20+100:], "written through a shared mapping")
	if err := unix.Munmap(mm); err != nil {
		t.Fatal(err)
	}
	r2, err := os.Open(p)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	check("second reader while a writer is open", r2)
	r2.Close()
	// Truncates through the writer, seen by the reader.
	if err := w.Truncate(int64(len(want) + 3<<20)); err != nil {
		t.Fatal(err)
	}
	want = append(want, make([]byte, 3<<20)...)
	check("reader after a growing truncate", r1)
	if err := w.Truncate(12 << 20); err != nil { // a chunk boundary: the last chunk stays clean
		t.Fatal(err)
	}
	want = want[:12<<20]
	check("reader after a shrinking truncate", r1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check("reader after the writer closed", r1)
	r1.Close()

	// A cached writer first, then a reader: both work.
	w, err = os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	r1, err = os.Open(p)
	if err != nil {
		t.Fatalf("reader while a cached writer is open: %v", err)
	}
	check("reader opened after a writer", r1)
	if _, err := w.WriteAt([]byte("late"), 10); err != nil {
		t.Fatal(err)
	}
	copy(want[10:], "late")
	check("reader opened after a writer, after its write", r1)
	w.Close()
	r1.Close()

	// Many opens of both kinds at once.
	done := make(chan error, 8)
	for i := range 8 {
		go func() {
			for j := range 40 {
				flag := os.O_RDONLY
				if (i+j)%3 == 0 {
					flag = os.O_RDWR
				}
				f, err := os.OpenFile(p, flag, 0)
				if err != nil {
					done <- err
					return
				}
				b := make([]byte, 4096)
				if _, err := f.ReadAt(b, int64(j)*4096); err != nil {
					f.Close()
					done <- err
					return
				}
				if flag == os.O_RDWR {
					if _, err := f.WriteAt(b, int64(j)*4096); err != nil {
						f.Close()
						done <- err
						return
					}
				}
				f.Close()
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatalf("concurrent opens: %v", err)
		}
	}
	r1, err = os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	check("after concurrent opens", r1)
	r1.Close()

	// What the mapping wrote reached the store.
	checkFreshCache(t, m, "f", want)
}

// TestPassthroughPinned: the data file under an open passthrough reader is
// never evicted (a cache a tenth of the file) and a restore rewrites
// it in place, so the reader reads the restored bytes.
func TestPassthroughPinned(t *testing.T) {
	needPassthrough(t)
	// A cache whose pin budget (half of it) takes the file; "other" then
	// takes the evictable bytes past their bound (the limit less f's).
	m := fstest.Start(t, fstest.Options{Args: append([]string{"--checkpoint-interval=-1s", "--cache-size=84M"}, ptArgs...)})
	reads := opCounter(t, m)
	p := filepath.Join(m.Dir, "f")
	one := pattern(40<<20+77, 4) // ten chunks: more than the read-ahead window eviction spares
	released := reads("release")
	if err := os.WriteFile(p, one, 0o644); err != nil {
		t.Fatal(err)
	}
	// The writer's open was cached, and its RELEASE is asynchronous: an
	// open the server answers before it sees that RELEASE is cached too
	// (one io mode per inode), which is not what this test is about.
	for deadline := time.Now().Add(time.Minute); reads("release") == released; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer's RELEASE did not reach the server in a minute")
		}
	}
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The sync makes the file's blocks clean cache; another file's, past
	// the evictable bytes' bound, and its fetch push eviction.
	m.Sync(t)
	if err := os.WriteFile(filepath.Join(m.Dir, "other"), pattern(48<<20, 5), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Sync(t)
	if _, err := os.ReadFile(filepath.Join(m.Dir, "other")); err != nil {
		t.Fatal(err)
	}
	before := reads("read")
	if got := preadAll(t, r, len(one)+1); !bytes.Equal(got, one) {
		t.Fatalf("passthrough reader after eviction: %d bytes (want %d), differs", len(got), len(one))
	}
	if n := reads("read") - before; n != 0 {
		t.Fatalf("the reader sent %d READs: not passthrough", n)
	}
	if out, err := m.Agentfs("snapshot", "save", m.Dir, "one"); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	r.Close()

	two := pattern(7<<20, 6)
	if err := os.WriteFile(p, two, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := preadAll(t, r, len(two)+1); !bytes.Equal(got, two) {
		t.Fatalf("passthrough reader of the new content: %d bytes, differs", len(got))
	}
	if out, err := m.Agentfs("snapshot", "restore", m.Dir, "one"); err != nil {
		t.Fatalf("snapshot restore: %v\n%s", err, out)
	}
	if got := preadAll(t, r, len(one)+1); !bytes.Equal(got, one) {
		t.Fatalf("passthrough reader after a restore: %d bytes (want %d), differs", len(got), len(one))
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, one) {
		t.Fatalf("new open after a restore: %d bytes, %v", len(got), err)
	}
}

// TestPassthroughMappingAfterClose: a read-only shared mapping made
// through a passthrough reader and kept after close(2) (the dynamic
// loader's pattern) maps the data file; it still reads the file's bytes
// after eviction runs (another file takes the evictable bytes past their
// bound) while a cached open holds the file open: the data file stays
// pinned until the kernel forgets the inode, not only until RELEASE.
func TestPassthroughMappingAfterClose(t *testing.T) {
	needPassthrough(t)
	// The pin budget (half the cache) takes the file.
	m := fstest.Start(t, fstest.Options{Args: append([]string{"--checkpoint-interval=-1s", "--cache-size=84M"}, ptArgs...)})
	reads := opCounter(t, m)
	p := filepath.Join(m.Dir, "f")
	want := pattern(40<<20+77, 8)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.Sync(t) // the file's blocks become clean cache, evictable once unpinned
	mm, err := unix.Mmap(fd, 0, len(want), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(fd)
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(mm) }()
	if err := unix.Close(fd); err != nil { // RELEASE; the mapping lives on
		t.Fatal(err)
	}
	before := reads("read")
	if !bytes.Equal(mm, want) {
		t.Fatal("mapping kept after close: differs")
	}
	if n := reads("read") - before; n != 0 {
		t.Fatalf("the mapping's faults sent %d READs: not passthrough", n)
	}
	// A cached open: the node is open again, and eviction punches an open
	// node's data file in place.
	w, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.WriteFile(filepath.Join(m.Dir, "other"), pattern(48<<20, 9), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Sync(t)
	if _, err := os.ReadFile(filepath.Join(m.Dir, "other")); err != nil {
		t.Fatal(err)
	}
	// Eviction runs in the background: look for a while.
	look := func(when string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if !bytes.Equal(mm, want) {
				zeros := bytes.Count(mm, []byte{0}) - bytes.Count(want, []byte{0})
				t.Fatalf("mapping kept after close, %s: differs (%d more zero bytes)", when, zeros)
			}
		}
	}
	look("after eviction")
	// No handle of f open: an open that finds no room in the pin budget
	// has the kernel prune the held inodes (reclaim); f is mapped, so the
	// kernel keeps it, and its pin, through another eviction.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(m.Dir, "big")
	if err := os.WriteFile(big, pattern(4<<20, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(big); err != nil { // whole locally, no room
		t.Fatal(err)
	}
	m.Sync(t)
	if _, err := os.ReadFile(filepath.Join(m.Dir, "other")); err != nil {
		t.Fatal(err)
	}
	look("after a reclaim and eviction")
}

// TestPassthroughBounded: an inode read through passthrough keeps its pin
// until the kernel forgets it, yet --cache-size bounds the cache: 24 files
// of 1 MiB, each read once right after it is written (whole locally, not
// yet clean) with O_DIRECT, under an 8 MiB cache leave at most 8 MiB cached once a sync
// makes them clean, and the server keeps a data file open for the pin
// budget's files (half the cache: 4), not for every file read; the first
// file read is served by passthrough (no READ), and so, once the opens
// that found no room had the kernel forget the idle held inodes
// (reclaim), is the last.
func TestPassthroughBounded(t *testing.T) {
	needPassthrough(t)
	const limit, files = 8 << 20, 24
	m := fstest.Start(t, fstest.Options{Args: append([]string{"--checkpoint-interval=-1s", fmt.Sprintf("--cache-size=%d", limit)}, ptArgs...)})
	reads := opCounter(t, m)
	fds := func() int {
		t.Helper()
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", m.PID))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	open := fds()
	for i := range files {
		p := filepath.Join(m.Dir, fmt.Sprintf("f%02d", i))
		want := pattern(1<<20, byte(i))
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		if n := readDirect(t, reads, p, 0, want); i == 0 && n != 0 {
			t.Fatalf("the first file read sent %d READs: passthrough is not in use", n)
		}
	}
	m.Sync(t)
	c := m.Client(t)
	var st control.Status
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if st, err = c.Status(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st.Volume.CacheBytes <= limit || time.Now().After(deadline) { // eviction runs in the background
			break
		}
	}
	if v := st.Volume; v.CacheBytes > limit || v.PinnedFiles > 4 || v.PinnedBytes > limit/2 {
		t.Errorf("%d bytes cached (%d files, %d bytes pinned) after reading %d files of 1 MiB through passthrough, limit %d", v.CacheBytes, v.PinnedFiles, v.PinnedBytes, files, limit)
	}
	if n := fds() - open; n > files/2 {
		t.Errorf("the server holds %d more descriptors after reading %d files (pin budget: 4 files)", n, files)
	}
	// An open that finds no room has the kernel prune the held inodes no
	// handle has open: their FORGETs make room, and the last file read
	// comes to be served by passthrough too.
	last := filepath.Join(m.Dir, fmt.Sprintf("f%02d", files-1))
	lastHead := pattern(4096, byte(files-1))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if readDirect(t, reads, last, 0, lastHead) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still read through the server after 10s: the held inodes were not reclaimed", last)
		}
	}
}

// TestPassthroughMappingWritesAfterClose: what a shared writable mapping
// made through a passthrough writer writes after the writer's close (and
// the reader's) is recorded once the kernel forgets the inode, and a
// fresh cache reads it after a sync.
func TestPassthroughMappingWritesAfterClose(t *testing.T) {
	needPassthrough(t)
	m, want, r, mm := writerMapping(t, 10)
	mapped := pattern(1<<20, 11)
	copy(mm[1<<20:], mapped)
	copy(want[1<<20:], mapped)
	if err := unix.Msync(mm, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	if err := unix.Munmap(mm); err != nil {
		t.Fatal(err)
	}
	if err := unix.Close(r); err != nil {
		t.Fatal(err)
	}
	// Drop the kernel's dentries and inodes: it forgets the file.
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		t.Fatalf("drop caches: %v", err)
	}
	time.Sleep(time.Second) // FORGET is queued, not answered
	checkFreshCache(t, m, "f", want)
}

// writerMapping mounts a volume with passthrough on and no timed
// checkpoints, writes file "f" of 4 MiB (pattern seed), opens it for
// reading (passthrough) and then read-write (a passthrough writer), maps
// the writer shared and writable, closes the writer and syncs (its
// RELEASE has been answered). It returns the mount, the file's bytes, the
// reader's descriptor and the mapping, which the caller closes and unmaps.
func writerMapping(t *testing.T, seed byte) (m *fstest.Mount, want []byte, r int, mm []byte) {
	t.Helper()
	m = fstest.Start(t, fstest.Options{Args: append([]string{"--checkpoint-interval=-1s"}, ptArgs...)})
	p := filepath.Join(m.Dir, "f")
	want = pattern(4<<20, seed)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := unix.Open(p, unix.O_RDONLY, 0) // passthrough
	if err != nil {
		t.Fatal(err)
	}
	w, err := unix.Open(p, unix.O_RDWR, 0) // a passthrough writer
	if err != nil {
		t.Fatal(err)
	}
	mm, err = unix.Mmap(w, 0, len(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Close(w); err != nil {
		t.Fatal(err)
	}
	m.Sync(t)
	return m, want, r, mm
}

// TestPassthroughMappingWritesCheckpointed: what a shared writable mapping
// made through a passthrough writer stores after every descriptor of the
// file is closed, while the mapping still holds the inode (no FORGET yet),
// is in the next checkpoint: a read-only mount of the store with a fresh
// cache reads it while the mapping is still in place.
func TestPassthroughMappingWritesCheckpointed(t *testing.T) {
	needPassthrough(t)
	m, want, r, mm := writerMapping(t, 12)
	defer func() { _ = unix.Munmap(mm) }()
	if err := unix.Close(r); err != nil {
		t.Fatal(err)
	}
	m.Sync(t) // the reader's RELEASE has been answered
	mapped := pattern(1<<20, 13)
	copy(mm[2<<20:], mapped)
	copy(want[2<<20:], mapped)
	m.Sync(t)
	ro := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true})
	got, err := os.ReadFile(filepath.Join(ro.Dir, "f"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the store after a sync, the mapping still in place: %d bytes (want %d), %v; same: %v", len(got), len(want), err, bytes.Equal(got, want))
	}
}

// TestPOSIXPassthrough runs the POSIX suite over a mount with FUSE
// passthrough on (--tune passthrough=1) and checkpoints every 500ms, after
// checking that passthrough is in use (an O_DIRECT read of a file written
// whole through the mount sends no READ to the server); then the volume
// passes fsck --full. Under CI=true a kernel without passthrough fails it.
func TestPOSIXPassthrough(t *testing.T) {
	needPassthrough(t)
	m := fstest.Start(t, fstest.Options{Args: append([]string{"--checkpoint-interval=500ms"}, ptArgs...)})
	reads := opCounter(t, m)
	p := filepath.Join(m.Dir, "probe")
	want := pattern(1<<20, 7)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := readDirect(t, reads, p, 128<<10, want[128<<10:][:64<<10]); n != 0 {
		t.Fatalf("an O_DIRECT read of a file whole locally sent %d READs: passthrough is not in use\nlog:\n%s", n, m.Log())
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	posixtest.Run(t, m.Dir, posixtest.Options{Exclude: posixExclusions})
	m.Sync(t)
	if out, err := m.Agentfs("fsck", "--full", m.URL); err != nil {
		t.Fatalf("fsck --full: %v\n%s", err, out)
	}
}

// checkFreshCache syncs and unmounts m, mounts its volume again with a
// fresh cache and fails t unless file name there holds want: what m wrote
// reached the store.
func checkFreshCache(t *testing.T, m *fstest.Mount, name string, want []byte) {
	t.Helper()
	m.Sync(t)
	m.Unmount(t)
	m2 := fstest.Start(t, fstest.Options{URL: m.URL, Dir: filepath.Join(t.TempDir(), "again")})
	got, err := os.ReadFile(filepath.Join(m2.Dir, name))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("fresh cache: %d bytes (want %d), %v; same: %v", len(got), len(want), err, bytes.Equal(got, want))
	}
}
