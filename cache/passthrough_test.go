package cache

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
	"time"

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
		f, err := v.PinLocal(ino, false)
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
	// A growing truncate grows the data file.
	grown := uint64(len(one) + 5<<20)
	if _, err := v.SetAttr(ctx, big.Ino, SetAttrIn{Size: &grown}); err != nil {
		t.Fatal(err)
	}
	if got := pinnedBytes(t, f); uint64(len(got)) != grown || !bytes.Equal(got[:len(one)], one) {
		t.Fatalf("pinned data file after a growing truncate: %d bytes, want %d", len(got), grown)
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
