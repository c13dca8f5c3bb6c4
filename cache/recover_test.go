package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/snapshot"
)

// crashClose stops v as a kill -9 of its server would once its writes had
// reached the database: no final checkpoint, no clean flag, nothing
// punched or persisted on the way out.
func crashClose(t *testing.T, v *Volume) {
	t.Helper()
	v.closed.Store(true)
	v.cancel()
	v.wg.Wait()
	v.fetch.Wait()
	if v.lease != nil {
		_ = v.lease.Release(context.Background())
	}
	if err := v.db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCrashForgetsUnrecordedBytes: a store through a shared writable
// mapping of a pinned file into a hole, never adopted, then a crash of the
// server. The restarted engine must read the committed zeros there (not
// the store's bytes), and a later write of one byte elsewhere in that block
// must not commit them.
func TestCrashForgetsUnrecordedBytes(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 64 << 10; c.PackSize = 4 << 20 })
	ctx := context.Background()
	dir := t.TempDir()
	v := openVolume(t, url, dir)
	bs := int(v.chunkSize)
	want := make([]byte, 4*bs)
	copy(want, bytes.Repeat([]byte("head"), bs/4)) // block 0 data, blocks 1-3 holes
	a, _ := syncedAndPinned(t, v, want)
	w, _, err := v.PinLocal(a.Ino, true, true)
	if err != nil || w == nil {
		t.Fatalf("writable pin: %v, %v", w, err)
	}
	m, err := unix.Mmap(int(w.Fd()), 0, len(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(m[2*bs+100:], "UNRECORDED")
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
	crashClose(t, v)

	v2 := openVolume(t, url, dir)
	ino := must[Attr](t)(v2.Lookup(ctx, RootIno, "f")).Ino
	if got := readFile(t, v2, ino); !bytes.Equal(got, want) {
		t.Errorf("after the crash, bytes at 2*bs+100: %q, want the committed %q", got[2*bs+100:2*bs+110], want[2*bs+100:2*bs+110])
	}
	if _, err := v2.Open(ctx, ino, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Write(ctx, ino, []byte{'w'}, uint64(2*bs+5000)); err != nil {
		t.Fatal(err)
	}
	want[2*bs+5000] = 'w'
	if err := v2.Release(ctx, ino); err != nil {
		t.Fatal(err)
	}
	if err := v2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := openVolume(t, url, "")
	if got := readFile(t, fresh, must[Attr](t)(fresh.Lookup(ctx, RootIno, "f")).Ino); !bytes.Equal(got, want) {
		t.Errorf("committed after a 1-byte write, bytes at 2*bs+100: %q, want %q", got[2*bs+100:2*bs+110], want[2*bs+100:2*bs+110])
	}
	if err := v2.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// TestCrashRemovesDataFileWithoutRecord: a file deleted, its deletion in
// the database, and the server killed before the deletion's after-flush
// hook removed its data file (the window between Badger's write and the
// hook; also a Close whose last flush failed). Nothing but the recovery
// after the crash can remove that data file: no record names the inode
// any more, so no eviction, open or deletion ever reaches it again. The
// restarted engine must remove it.
func TestCrashRemovesDataFileWithoutRecord(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 64 << 10; c.PackSize = 4 << 20 })
	ctx := context.Background()
	dir := t.TempDir()
	v := openVolume(t, url, dir)
	a := writeFile(t, v, RootIno, "f", bytes.Repeat([]byte("data"), 3*int(v.chunkSize)/4))
	kept := writeFile(t, v, RootIno, "kept", bytes.Repeat([]byte("kept"), 3*int(v.chunkSize)/4))
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	path := v.files.Path(a.Ino)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the synced file's data file: %v", err)
	}
	if err := v.Unlink(ctx, RootIno, "f"); err != nil {
		t.Fatal(err)
	}
	crashClose(t, v)
	// What the crash left: the deletion in the database, the data file
	// still there (crashClose's flush ran the hook that removes it).
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	v2 := openVolume(t, url, dir)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data file of deleted inode %d after the recovery: %v; want it removed", a.Ino, err)
	}
	if _, err := os.Stat(v2.files.Path(kept.Ino)); err != nil {
		t.Errorf("data file of the file that remains: %v", err)
	}
	if got := readFile(t, v2, must[Attr](t)(v2.Lookup(ctx, RootIno, "kept")).Ino); !bytes.Equal(got, bytes.Repeat([]byte("kept"), 3*int(v2.chunkSize)/4)) {
		t.Error("the file that remains reads wrong after the recovery")
	}
	if err := v2.checkInvariants(); err != nil {
		t.Error(err)
	}
}
