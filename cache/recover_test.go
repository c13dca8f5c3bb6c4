package cache

import (
	"bytes"
	"context"
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
