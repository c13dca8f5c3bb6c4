package cache

import (
	"bytes"
	"context"
	"testing"

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
