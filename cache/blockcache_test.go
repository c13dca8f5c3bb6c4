package cache

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// dataBytes returns the disk space the data files of v's cache use.
func dataBytes(t testing.TB, v *Volume) int64 {
	t.Helper()
	var sum int64
	err := filepath.WalkDir(v.files.Dir(), func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed meanwhile
		} else if err != nil {
			return err
		}
		sum += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// bigFileVolume makes a volume (64 KiB chunks) whose main branch holds
// "big", size bytes of random data, and returns its URL, the file's inode
// and its contents.
func bigFileVolume(t testing.TB, size int) (string, uint64, []byte) {
	t.Helper()
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 64 << 10; c.PackSize = 4 << 20 })
	data := make([]byte, size)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(data)
	w := openVolume(t, url, "")
	a := writeFile(t, w, RootIno, "big", data)
	if err := w.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return url, a.Ino, data
}

// TestCacheLimitOnRead: reading a file many times larger than
// Options.CacheSize, while it stays open, keeps the block cache (as the
// engine counts it and as disk usage of its data files shows) near its
// limit; every byte read is right, for a sequential reader and for
// concurrent random readers.
func TestCacheLimitOnRead(t *testing.T) {
	const limit = 1 << 20
	url, ino, data := bigFileVolume(t, 16<<20)
	// Readers evict themselves past 1.5 times the limit; add the blocks a
	// reader keeps (ReadAhead after the last read, the one before it, the
	// one fetched last) and those read-ahead installs meanwhile.
	const slack = 12 * (64 << 10)
	ctx := context.Background()
	v := openVolume(t, url, "", func(o *Options) { o.CacheSize = limit })
	if _, err := v.Lookup(ctx, RootIno, "big"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Open(ctx, ino, false); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = v.Release(ctx, ino) }()

	var peak, peakDisk int64
	buf := make([]byte, 128<<10)
	for off := 0; off < len(data); off += len(buf) {
		n, err := v.Read(ctx, ino, buf, uint64(off))
		if err != nil || !bytes.Equal(buf[:n], data[off:off+n]) {
			t.Fatalf("read at %d: %d bytes, %v, right: %v", off, n, err, bytes.Equal(buf[:n], data[off:off+n]))
		}
		peak = max(peak, v.blocks.Used())
		if off%(1<<20) == 0 {
			peakDisk = max(peakDisk, dataBytes(t, v))
		}
	}
	t.Logf("sequential: peak cache %d, peak disk %d (limit %d)", peak, peakDisk, limit)
	if peak > limit+limit/2+slack || peakDisk > limit+limit/2+slack {
		t.Errorf("sequential read of %d bytes with a %d-byte cache: the cache peaked at %d bytes (%d on disk)", len(data), limit, peak, peakDisk)
	}

	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			b := make([]byte, 100_000)
			for range 200 {
				off := rng.IntN(len(data) - len(b))
				n, err := v.Read(ctx, ino, b, uint64(off))
				if err != nil || n != len(b) || !bytes.Equal(b, data[off:off+n]) {
					errs <- "wrong bytes from a random read"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if got := dataBytes(t, v); got > limit+4*slack {
		t.Errorf("after random reads: %d bytes on disk, limit %d", got, limit)
	}
}

// BenchmarkColdRead reads a 16 MiB file sequentially from a cold cache,
// with a cache that holds it all (no eviction, as every read was before
// reads evicted) and with a 1 MiB cache that must evict as it reads:
//
//	go test -run XXX -bench ColdRead -benchtime 5x ./cache
func BenchmarkColdRead(b *testing.B) {
	url, ino, data := bigFileVolume(b, 16<<20)
	for _, bc := range []struct {
		name  string
		limit int64
	}{{"cache=10GiB", 10 << 30}, {"cache=1MiB", 1 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.SetBytes(int64(len(data)))
			buf := make([]byte, 128<<10)
			for range b.N {
				b.StopTimer()
				v := openVolume(b, url, "", func(o *Options) { o.CacheSize = bc.limit })
				if _, err := v.Lookup(ctx, RootIno, "big"); err != nil {
					b.Fatal(err)
				}
				if _, err := v.Open(ctx, ino, false); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for off := 0; off < len(data); off += len(buf) {
					if _, err := v.Read(ctx, ino, buf, uint64(off)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(dataBytes(b, v))/(1<<20), "MiB-on-disk")
				if err := v.Release(ctx, ino); err != nil {
					b.Fatal(err)
				}
				if err := v.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// TestReopenCountsExtents: a reopened volume counts each present block by
// its extent within its file, as when it was installed, so that writing
// the block takes exactly its count away. It counted whole blocks before:
// a 5-byte file's block counted 4096 bytes after a reopen, and 4091 of
// them stayed counted once the block was written.
func TestReopenCountsExtents(t *testing.T) {
	ctx := context.Background()
	url, dir := testStoreURL(t), t.TempDir()
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 4096 })
	v := openVolume(t, url, dir)
	ino := writeFile(t, v, RootIno, "f", []byte("hello")).Ino
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}
	v = openVolume(t, url, dir)
	if got := v.blocks.Counted()[ino]; got != 5 {
		t.Errorf("after reopen the block cache counts %d bytes for a present 5-byte block, want 5", got)
	}
	if _, err := v.Open(ctx, ino, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Write(ctx, ino, []byte("J"), 0); err != nil {
		t.Fatal(err)
	}
	if err := v.Release(ctx, ino); err != nil {
		t.Fatal(err)
	}
	if got := v.blocks.Used(); got != 0 {
		t.Errorf("after writing the only present block the block cache counts %d bytes, want 0", got)
	}
	if err := v.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// TestGrowCountsExtents: a file that grows makes its present last block
// longer (its new bytes read as zeros), and the block cache counts the
// block at its new extent, so that an eviction or a write of the block
// takes exactly its count away. Before, the count kept the extent of the
// block's install: writing the grown block took its whole extent away,
// and the file's other present blocks stopped being counted (bytes the
// cache's limit no longer saw).
func TestGrowCountsExtents(t *testing.T) {
	ctx := context.Background()
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 4096 })
	v := openVolume(t, url, "")
	bs := int64(v.chunkSize)
	ino := writeFile(t, v, RootIno, "f", bytes.Repeat([]byte("x"), int(bs+bs/2))).Ino
	other := writeFile(t, v, RootIno, "g", bytes.Repeat([]byte("y"), int(bs+bs/2))).Ino
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := v.blocks.Bytes(ino); got != bs+bs/2 {
		t.Fatalf("after the sync the block cache counts %d bytes for the file, want %d", got, bs+bs/2)
	}
	if _, err := v.Open(ctx, ino, false); err != nil {
		t.Fatal(err)
	}
	size := uint64(3 * bs)
	if _, err := v.SetAttr(ctx, ino, SetAttrIn{Size: &size}); err != nil {
		t.Fatal(err)
	}
	if got := v.blocks.Bytes(ino); got != 2*bs {
		t.Errorf("after growing to 3 blocks the block cache counts %d bytes, want %d (2 present blocks)", got, 2*bs)
	}
	if _, err := v.Write(ctx, ino, []byte("z"), uint64(bs+10)); err != nil {
		t.Fatal(err)
	}
	if got := v.blocks.Bytes(ino); got != bs {
		t.Errorf("after writing block 1 the block cache counts %d bytes, want %d (block 0)", got, bs)
	}
	if err := v.Release(ctx, ino); err != nil {
		t.Fatal(err)
	}
	// Grown by a write past the end, not into the partial block.
	if _, err := v.Open(ctx, other, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Write(ctx, other, []byte("z"), uint64(3*bs)); err != nil {
		t.Fatal(err)
	}
	if got := v.blocks.Bytes(other); got != 2*bs {
		t.Errorf("after a write past the end the block cache counts %d bytes, want %d (2 present blocks)", got, 2*bs)
	}
	if err := v.Release(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := v.checkInvariants(); err != nil {
		t.Error(err)
	}
}
