package cache

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/agentfs/agentfs/snapshot"
)

// TestRecordedAsByExtent: what AdoptPinned rechecks of a block after
// comparing it (recordedAs) is its chunk and its extent within the file,
// so that a write growing the file elsewhere between the comparison and
// the marking changes no other block's key and dirties nothing else.
func TestRecordedAsByExtent(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 64 << 10; c.PackSize = 4 << 20 })
	ctx := context.Background()
	v := openVolume(t, url, "")
	bs := int(v.chunkSize)
	a, _ := syncedAndPinned(t, v, bytes.Repeat([]byte("abcd"), (2*bs+100)/4))
	n := must[*node](t)(v.openNode(a.Ino))
	key := func(b uint64) recKey {
		n.mu.RLock()
		defer n.mu.RUnlock()
		return v.recordedAs(n, b)
	}
	k0, k2 := key(0), key(2)
	if _, err := v.Write(ctx, a.Ino, []byte("tail"), uint64(2*bs+100)); err != nil {
		t.Fatal(err)
	}
	if got := key(0); got != k0 {
		t.Errorf("block 0's key changed when the file grew in block 2: %+v, was %+v", got, k0)
	}
	if got := key(2); got == k2 {
		t.Errorf("block 2's key did not change when the file grew in it: %+v", got)
	}
}

// TestAdoptPinnedHashUnlocked: an adoption reads and hashes the data file
// under no lock of the engine, so a write to the file being adopted, a
// namespace change and a checkpoint all complete while the hash is held
// midway (adoptHook); and a block the hash found as recorded, then
// written and checkpointed (clean again, under another chunk) before the
// adoption marks, ends dirty: its key changed. The write and the store
// behind the engine both reach the store.
func TestAdoptPinnedHashUnlocked(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 64 << 10; c.PackSize = 4 << 20 })
	ctx := context.Background()
	v := openVolume(t, url, "")
	bs := int(v.chunkSize)
	want := bytes.Repeat([]byte("base"), 4*bs/4)
	a, f := syncedAndPinned(t, v, want)
	// A store behind the engine into block 3, so the adoption compares.
	if _, err := f.WriteAt([]byte("mapped"), int64(3*bs+5)); err != nil {
		t.Fatal(err)
	}
	copy(want[3*bs+5:], "mapped")

	hashed, resume := make(chan struct{}), make(chan struct{})
	v.adoptHook = func(ino, b uint64) {
		if ino == a.Ino && b == 0 {
			close(hashed)
			<-resume
		}
	}
	adopted := make(chan error, 1)
	go func() { adopted <- v.AdoptPinned(ctx, a.Ino) }()
	<-hashed // block 0 compared, as recorded; the rest not yet

	done := make(chan error, 1)
	go func() {
		if _, err := v.Write(ctx, a.Ino, []byte("written"), 10); err != nil {
			done <- err
			return
		}
		c, err := v.Create(ctx, RootIno, "meanwhile", 0o644, Cred{}, true, false)
		if err == nil {
			err = v.Release(ctx, c.Ino)
		}
		if err != nil {
			done <- err
			return
		}
		done <- v.Sync(ctx) // block 0 clean again, under the write's chunk
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a deadlock's bound, not a timing
		close(resume)
		t.Fatal("a write, a create and a checkpoint waited for the adoption's hash")
	}
	copy(want[10:], "written")
	close(resume)
	if err := <-adopted; err != nil {
		t.Fatal(err)
	}
	n := must[*node](t)(v.openNode(a.Ino))
	n.mu.RLock()
	dirty0, dirty3, dirty1 := n.rec.IsDirty(0), n.rec.IsDirty(3), n.rec.IsDirty(1)
	n.mu.RUnlock()
	if !dirty0 || !dirty3 || dirty1 {
		t.Errorf("after the adoption: block 0 dirty %v (written during the hash, want true), block 3 %v (stored behind the engine, want true), block 1 %v (unchanged, want false)", dirty0, dirty3, dirty1)
	}
	if err := v.checkInvariants(); err != nil {
		t.Fatalf("after adopting: %v", err)
	}
	if got := unpinnedFresh(t, v, a.Ino, f, url); !bytes.Equal(got, want) {
		t.Errorf("fresh cache: %q at 10, %q at 3*bs+5; want %q, %q", got[10:17], got[3*bs+5:3*bs+11], want[10:17], want[3*bs+5:3*bs+11])
	}
}
