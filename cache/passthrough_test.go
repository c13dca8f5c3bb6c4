package cache

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache/commit"
	"github.com/agentfs/agentfs/snapshot"
)

// pinnedBytes reads the whole data file behind a pin.
func pinnedBytes(t *testing.T, f *os.File) []byte {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return b
}

// TestPinLocal: only files whole in their data file are pinned; a pinned
// data file keeps the file's content, at its size, through eviction, a
// growing truncate and a switch to another commit (which rewrites it in
// place).
func TestPinLocal(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	v := openVolume(t, url, "")
	small := writeFile(t, v, RootIno, "small", []byte("inline"))
	one := bytes.Repeat([]byte("one."), 30<<20/4+5) // eight chunks: more than eviction spares around the last read
	big := writeFile(t, v, RootIno, "big", one)
	pin := func(ino uint64) *os.File {
		t.Helper()
		if _, err := v.Open(ctx, ino, false); err != nil {
			t.Fatal(err)
		}
		f, _, err := v.PinLocal(ino, false, false)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	unpin := func(ino uint64, f *os.File) {
		t.Helper()
		if f != nil {
			v.Unpin(ino)
			f.Close()
		}
		if err := v.Release(ctx, ino); err != nil {
			t.Fatal(err)
		}
	}
	if f := pin(small.Ino); f != nil {
		t.Errorf("an inline file was pinned")
		unpin(small.Ino, f)
	} else {
		unpin(small.Ino, nil)
	}
	f := pin(big.Ino)
	if f == nil {
		t.Fatal("a file written whole was not pinned")
	}
	if got := pinnedBytes(t, f); !bytes.Equal(got, one) {
		t.Fatalf("pinned data file: %d bytes, want %d", len(got), len(one))
	}
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	base := must[snapshot.Commit](t)(v.repo.Head(ctx, "main"))
	// Eviction passes a pinned file over.
	if err := (fileEvictor{v}).EvictFile(big.Ino); err != nil {
		t.Fatal(err)
	}
	if got := pinnedBytes(t, f); !bytes.Equal(got, one) {
		t.Fatalf("pinned data file after eviction: differs")
	}
	if err := v.checkInvariants(); err != nil {
		t.Fatalf("after eviction: %v", err)
	}
	// A growing truncate grows the data file.
	grown := uint64(len(one) + 5<<20)
	if _, err := v.SetAttr(ctx, big.Ino, SetAttrIn{Size: &grown}); err != nil {
		t.Fatal(err)
	}
	if got := pinnedBytes(t, f); uint64(len(got)) != grown || !bytes.Equal(got[:len(one)], one) {
		t.Fatalf("pinned data file after a growing truncate: %d bytes, want %d", len(got), grown)
	}
	if err := v.checkInvariants(); err != nil {
		t.Fatalf("after a growing truncate: %v", err)
	}
	// New content, then a switch back to base: the data file holds base's.
	two := bytes.Repeat([]byte("TWO!"), 6<<20/4)
	if _, err := v.Write(ctx, big.Ino, two, 0); err != nil {
		t.Fatal(err)
	}
	c := base
	c.ID.Seq = base.ID.Seq + 1
	c.Parent = &base.ID
	c.Kind = "restore"
	c.Time = time.Now().UTC()
	if err := v.repo.WriteCommit(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := v.SwitchTo(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := pinnedBytes(t, f); !bytes.Equal(got, one) {
		t.Fatalf("pinned data file after a switch: %d bytes, want %d (the old content)", len(got), len(one))
	}
	if err := v.checkInvariants(); err != nil {
		t.Fatalf("after a switch: %v", err)
	}
	unpin(big.Ino, f)

	// A fresh cache: the file is remote, not pinned, until read whole.
	v = openVolume(t, url, "")
	big = must[Attr](t)(v.Lookup(ctx, RootIno, "big"))
	if f := pin(big.Ino); f != nil {
		t.Errorf("a remote file was pinned")
		unpin(big.Ino, f)
	} else {
		unpin(big.Ino, nil)
	}
	if got := readFile(t, v, big.Ino); !bytes.Equal(got, one) {
		t.Fatalf("read: differs")
	}
	f = pin(big.Ino)
	if f == nil {
		t.Fatal("a file read whole was not pinned")
	}
	if got := pinnedBytes(t, f); !bytes.Equal(got, one) {
		t.Fatalf("pinned data file of a fetched file: differs")
	}
	unpin(big.Ino, f)
}

// TestAdoptPinned: what a writer changed in a pinned data file behind the
// engine (a shared mapping), in a clean block and in a hole alike, is
// adopted and reaches the store; a fresh cache reads it back.
func TestAdoptPinned(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	v := openVolume(t, url, "")
	bs := int(v.chunkSize)
	want := bytes.Repeat([]byte("base"), 2*bs/4) // two clean blocks once synced
	a, f := syncedAndPinned(t, v, want)
	grown := uint64(4 * bs) // blocks 2 and 3 are holes
	if _, err := v.SetAttr(ctx, a.Ino, SetAttrIn{Size: &grown}); err != nil {
		t.Fatal(err)
	}
	want = append(want, make([]byte, 2*bs)...)
	// Writes behind the engine: into clean block 1 and hole block 3.
	for _, off := range []int{bs + 10, 3*bs + 20} {
		if _, err := f.WriteAt([]byte("mapped"), int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(want[off:], "mapped")
	}
	if err := v.AdoptPinned(ctx, a.Ino); err != nil {
		t.Fatal(err)
	}
	if err := v.checkInvariants(); err != nil {
		t.Fatalf("after adopting: %v", err)
	}
	if got := unpinnedFresh(t, v, a.Ino, f, url); !bytes.Equal(got, want) {
		for _, off := range []int{bs + 10, 3*bs + 20} {
			t.Errorf("at %d: %q, want %q", off, got[off:off+6], want[off:off+6])
		}
	}
}

// TestAdoptPinnedDuringCheckpoint: a mapping's write into a block already
// dirty, adopted (the writer's fsync) between a checkpoint's capture of the
// block's older bytes and its apply, stays dirty and reaches the store: the
// adoption bumps the block's generation, so apply does not mark it clean.
func TestAdoptPinnedDuringCheckpoint(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	v := openVolume(t, url, "")
	bs := int(v.chunkSize)
	base := bytes.Repeat([]byte("base"), 2*bs/4)
	a, f := syncedAndPinned(t, v, base)
	// A write(2) through the engine: block 0 dirty (B1).
	if _, err := v.Write(ctx, a.Ino, []byte("B1B1B1"), 0); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(base)
	copy(want, "B2B2B2")

	// A checkpoint, by hand, with a mapping write + fsync between its
	// capture and its apply (checkpointLocked's steps).
	v.cpMu.Lock()
	up := commit.NewUploader(ctx, v.repo, v.opts.UploadConcurrency, v.now())
	if err := v.captureFile(v.capture(up), a.Ino, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("B2B2B2"), 0); err != nil { // the mapping
		t.Fatal(err)
	}
	if err := v.AdoptPinned(ctx, a.Ino); err != nil { // the writer's fsync
		t.Fatal(err)
	}
	res, err := v.freeze(up)
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Finish(); err != nil {
		t.Fatal(err)
	}
	st := v.getState()
	c := snapshot.Commit{ID: snapshot.CommitID{Branch: st.Branch, Seq: st.Seq + 1}, Parent: &snapshot.CommitID{Branch: st.Branch, Seq: st.Seq},
		Root: res.root, Links: res.links, Time: v.now().UTC(), Kind: "checkpoint", Writer: st.Writer}
	if err := v.repo.WriteCommit(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := v.apply(c, res, up); err != nil {
		t.Fatal(err)
	}
	v.cpMu.Unlock()

	if got := unpinnedFresh(t, v, a.Ino, f, url); !bytes.Equal(got[:6], want[:6]) {
		t.Errorf("fresh cache after an fsync'd mapping write: %q, want %q", got[:6], want[:6])
	}
}

// TestAdoptPinnedChangedBlocks: an adoption dirties only the blocks whose
// data-file bytes differ from the record. A 1-byte write through the
// engine to a 16-block file under a pin, adopted twice (a passthrough
// writer's fsync and release), uploads one block, where every adoption
// used to upload the whole file; an adoption that finds nothing changed
// commits nothing; a store through a shared mapping is adopted, and so is
// a second store into the same page after the adoption (the page stays
// writable in the mapping, without a fault that moves the data file's
// times, unless the adoption wrote it back).
func TestAdoptPinnedChangedBlocks(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 64 << 10; c.PackSize = 4 << 20 })
	ctx := context.Background()
	v := openVolume(t, url, "")
	bs := int(v.chunkSize)
	want := make([]byte, 16*bs)
	_, _ = rand.Read(want) // incompressible: a block uploads about bs bytes
	a, f := syncedAndPinned(t, v, want)
	adopt := func() {
		t.Helper()
		if err := v.AdoptPinned(ctx, a.Ino); err != nil {
			t.Fatal(err)
		}
	}
	// uploaded runs change and a sync, and returns the bytes the sync
	// uploaded (0: nothing to commit).
	uploaded := func(change func()) int64 {
		t.Helper()
		before := v.stats.Report().Commits
		change()
		if err := v.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if r := v.stats.Report(); r.Commits != before {
			return r.Bytes
		}
		return 0
	}
	oneBlock := func(step string, n int64) {
		t.Helper()
		if n <= 0 || n > int64(2*bs) {
			t.Errorf("%s: the sync uploaded %d bytes, want one block's (%d)", step, n, bs)
		}
	}
	oneBlock("a 1-byte write, adopted twice", uploaded(func() {
		if _, err := v.Write(ctx, a.Ino, []byte{'x'}, uint64(5*bs+3)); err != nil {
			t.Fatal(err)
		}
		want[5*bs+3] = 'x'
		adopt()
		adopt()
	}))
	// The data file's ctime older than the coarse clock's tick: the stamp
	// an adoption takes is trusted from now on.
	time.Sleep(20 * time.Millisecond)
	if n := uploaded(adopt); n != 0 {
		t.Errorf("an adoption of an unchanged data file: the sync uploaded %d bytes, want nothing", n)
	}
	mm, err := unix.Mmap(int(f.Fd()), 0, len(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(mm) }()
	for _, s := range []string{"first", "again"} {
		oneBlock("a store through a mapping ("+s+")", uploaded(func() {
			copy(mm[9*bs+7:], s)
			copy(want[9*bs+7:], s)
			time.Sleep(20 * time.Millisecond)
			adopt()
		}))
	}
	if err := unix.Munmap(mm); err != nil {
		t.Fatal(err)
	}
	mm = nil // not again: the next mapping of the same size may take its address
	if got := unpinnedFresh(t, v, a.Ino, f, url); !bytes.Equal(got, want) {
		t.Errorf("fresh cache: differs at 5*bs+3 (%v) or 9*bs+7 (%v)", got[5*bs+3] == want[5*bs+3], bytes.Equal(got[9*bs+7:9*bs+12], want[9*bs+7:9*bs+12]))
	}
}

// TestCheckpointAdoptsMapped: a checkpoint adopts a file pinned for a
// writer before it captures, so what a shared writable mapping of its data
// file stored reaches the commit without an AdoptPinned call (the
// writer's descriptor closed, the file still pinned for a reader, as the
// FUSE layer holds an inode until the kernel forgets it); the file's last
// Unpin ends it.
func TestCheckpointAdoptsMapped(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 64 << 10; c.PackSize = 4 << 20 })
	ctx := context.Background()
	v := openVolume(t, url, "")
	bs := int(v.chunkSize)
	want := bytes.Repeat([]byte("base"), 4*bs/4)
	a, f := syncedAndPinned(t, v, want)
	w, _, err := v.PinLocal(a.Ino, true, true) // the writer's
	if err != nil || w == nil {
		t.Fatalf("writable pin: %v, %v", w, err)
	}
	mm, err := unix.Mmap(int(w.Fd()), 0, len(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(mm) }()
	v.Unpin(a.Ino) // the writer's close
	w.Close()
	copy(mm[2*bs+5:], "mapped")
	copy(want[2*bs+5:], "mapped")
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	v2 := openVolume(t, url, "")
	a2 := must[Attr](t)(v2.Lookup(ctx, RootIno, "f"))
	if got := readFile(t, v2, a2.Ino); !bytes.Equal(got, want) {
		t.Errorf("fresh cache after a sync: %q at %d, want %q", got[2*bs+5:2*bs+11], 2*bs+5, "mapped")
	}
	v.Unpin(a.Ino)
	f.Close()
	if got := v.adopted.list(); len(got) != 0 {
		t.Errorf("after the last unpin, checkpoints still adopt %v", got)
	}
	if err := v.Release(ctx, a.Ino); err != nil {
		t.Fatal(err)
	}
}

// unpinnedFresh unpins and releases file "f" of v (inode ino, pinned as
// pf), syncs v and returns the file as a fresh cache of store url reads it.
func unpinnedFresh(t *testing.T, v *Volume, ino uint64, pf *os.File, url string) []byte {
	t.Helper()
	ctx := context.Background()
	v.Unpin(ino)
	pf.Close()
	if err := v.Release(ctx, ino); err != nil {
		t.Fatal(err)
	}
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := openVolume(t, url, "")
	return readFile(t, fresh, must[Attr](t)(fresh.Lookup(ctx, RootIno, "f")).Ino)
}

// syncedAndPinned writes file "f" of v with data, syncs it (its blocks
// clean and present), opens it and pins it, returning its attributes and
// the pinned data file.
func syncedAndPinned(t *testing.T, v *Volume, data []byte) (Attr, *os.File) {
	t.Helper()
	ctx := context.Background()
	a := writeFile(t, v, RootIno, "f", data)
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Open(ctx, a.Ino, false); err != nil {
		t.Fatal(err)
	}
	f, _, err := v.PinLocal(a.Ino, false, false)
	if err != nil || f == nil {
		t.Fatalf("pin: %v, %v", f, err)
	}
	return a, f
}

// TestPinLocalBudget: PinLocal pins a whole file only while the block
// cache's pin budget (half the cache size) has room for it, and says when
// that is why it did not (full); a file not whole is no want of room.
func TestPinLocalBudget(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	v := openVolume(t, url, "", func(o *Options) { o.CacheSize = 8 << 20 })
	a := writeFile(t, v, RootIno, "a", bytes.Repeat([]byte("a"), 3<<20))
	b := writeFile(t, v, RootIno, "b", bytes.Repeat([]byte("b"), 2<<20))
	for _, ino := range []uint64{a.Ino, b.Ino} {
		if _, err := v.Open(ctx, ino, false); err != nil {
			t.Fatal(err)
		}
	}
	fa, full, err := v.PinLocal(a.Ino, false, false)
	if err != nil || fa == nil || full {
		t.Fatalf("pin of 3 MiB within a budget of 4: %v, full %v, %v", fa, full, err)
	}
	if fb, full, err := v.PinLocal(b.Ino, false, false); err != nil || fb != nil || !full {
		t.Fatalf("pin of 2 MiB more: %v, full %v, %v; want nil, full", fb, full, err)
	}
	v.Unpin(a.Ino)
	fa.Close()
	fb, full, err := v.PinLocal(b.Ino, false, false)
	if err != nil || fb == nil || full {
		t.Fatalf("pin after the unpin: %v, full %v, %v", fb, full, err)
	}
	v.Unpin(b.Ino)
	fb.Close()
	for _, ino := range []uint64{a.Ino, b.Ino} {
		if err := v.Release(ctx, ino); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	v = openVolume(t, url, "", func(o *Options) { o.CacheSize = 8 << 20 })
	b = must[Attr](t)(v.Lookup(ctx, RootIno, "b"))
	if _, err := v.Open(ctx, b.Ino, false); err != nil {
		t.Fatal(err)
	}
	if f, full, err := v.PinLocal(b.Ino, false, false); err != nil || f != nil || full {
		t.Fatalf("pin of a remote file: %v, full %v, %v; want nil, not full", f, full, err)
	}
	if err := v.Release(ctx, b.Ino); err != nil {
		t.Fatal(err)
	}
}
