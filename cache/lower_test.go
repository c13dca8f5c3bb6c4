package cache

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

// memLower is a Lower of regular files in one directory (its root), held
// in memory; the test changes them as a host would.
type memLower struct {
	mu    sync.Mutex
	files map[string][]byte // guarded by mu
	mtime map[string]int64  // guarded by mu
}

func (l *memLower) set(name string, b []byte, mtime int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.files[name], l.mtime[name] = b, mtime
}

func (l *memLower) Stat(_ context.Context, origin string) (snapshot.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if origin == "" {
		return snapshot.Entry{Type: snapshot.TypeDir, Mode: 0o755, Nlink: 2}, nil
	}
	b, ok := l.files[origin]
	if !ok {
		return snapshot.Entry{}, fmt.Errorf("%s: %w", origin, ErrNotFound)
	}
	t := l.mtime[origin]
	return snapshot.Entry{Name: origin, Type: snapshot.TypeFile, Mode: 0o644, Size: uint64(len(b)), Mtime: t, Ctime: t, Nlink: 1}, nil
}

func (l *memLower) Entries(ctx context.Context, origin string) ([]snapshot.Entry, error) {
	if origin != "" {
		return nil, nil
	}
	l.mu.Lock()
	names := make([]string, 0, len(l.files))
	for n := range l.files {
		names = append(names, n)
	}
	l.mu.Unlock()
	slices.Sort(names)
	var out []snapshot.Entry
	for _, n := range names {
		e, err := l.Stat(ctx, n)
		if err != nil {
			return nil, err
		}
		e.HasOrigin, e.Origin, e.OriginSize = true, n, e.Size
		out = append(out, e)
	}
	return out, nil
}

func (l *memLower) Open(_ context.Context, origin string) (LowerFile, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.files[origin]
	if !ok {
		return nil, fmt.Errorf("%s: %w", origin, ErrNotFound)
	}
	return nopCloser{bytes.NewReader(b)}, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// openVirtual opens a virtual workspace over lower: a branch whose first
// commit's root reads through to lower's root.
func openVirtual(t *testing.T, lower Lower) *Volume {
	t.Helper()
	ctx := context.Background()
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 4096 })
	s, err := blobstore.Open(ctx, url, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := snapshot.OpenWithKey(ctx, s, testKeys)
	if err != nil {
		t.Fatal(err)
	}
	c := snapshot.Commit{ID: snapshot.CommitID{Branch: "ws", Seq: 1}, Time: time.Now().UTC(), Kind: "virtual",
		Root:    snapshot.RootDir{Mode: 0o755, Nlink: 2, HasOrigin: true},
		Virtual: &snapshot.VirtualBase{HostDir: "/mem", Since: time.Now().UTC()}}
	if err := r.WriteCommit(ctx, c); err != nil {
		t.Fatal(err)
	}
	return openVolume(t, url, "", func(o *Options) { o.Branch, o.Lower = "ws", lower })
}

// TestRefreshOriginDropsCount: an unmodified file of the lower that holds
// copies of its origin's blocks (a copy-up whose write did not follow)
// drops them when the origin changes on the host, and the block cache
// stops counting them. Before the fix the count stayed: the cache went on
// counting bytes that no data file held.
func TestRefreshOriginDropsCount(t *testing.T) {
	ctx := context.Background()
	lower := &memLower{files: map[string][]byte{}, mtime: map[string]int64{}}
	old := bytes.Repeat([]byte("o"), 10000)
	lower.set("f", old, 1)
	v := openVirtual(t, lower)
	a := must[Attr](t)(v.Lookup(ctx, RootIno, "f"))
	if _, err := v.Open(ctx, a.Ino, false); err != nil {
		t.Fatal(err)
	}
	n := v.lookupNode(a.Ino)
	if err := v.fetch.Block(ctx, n, 1); err != nil { // the copy-up a partial write makes
		t.Fatal(err)
	}
	if err := v.Release(ctx, a.Ino); err != nil {
		t.Fatal(err)
	}
	if got := v.blocks.Counted()[a.Ino]; got != 4096 {
		t.Fatalf("block cache counts %d bytes for the copied-up block, want 4096", got)
	}
	if err := v.checkInvariants(); err != nil {
		t.Fatal(err)
	}

	lower.set("f", []byte(strings.Repeat("n", 5000)), 2)
	if got := readFile(t, v, a.Ino); string(got) != strings.Repeat("n", 5000) {
		t.Fatalf("after the host changed the file: read %d bytes %q..., want its new bytes", len(got), got[:min(len(got), 8)])
	}
	if got := v.blocks.Counted()[a.Ino]; got != 0 {
		t.Errorf("block cache counts %d bytes for a file whose copies were dropped", got)
	}
	if err := v.checkInvariants(); err != nil {
		t.Error(err)
	}
}

// gatedLower is a memLower whose next Stat, once armed, waits until the
// test releases it.
type gatedLower struct {
	*memLower
	mu      sync.Mutex
	entered chan struct{} // closed when the armed Stat is called; guarded by mu
	release chan struct{} // closed by the test to let it return; guarded by mu
}

// arm makes the next Stat wait: it closes the first channel returned when
// it is called and returns once the test closes the second.
func (l *gatedLower) arm() (entered <-chan struct{}, release chan<- struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entered, l.release = make(chan struct{}), make(chan struct{})
	return l.entered, l.release
}

func (l *gatedLower) Stat(ctx context.Context, origin string) (snapshot.Entry, error) {
	l.mu.Lock()
	entered, release := l.entered, l.release
	l.entered, l.release = nil, nil
	l.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
	return l.memLower.Stat(ctx, origin)
}

// TestConcurrentFirstOpen: two first opens of one file (not open yet)
// whose origin changed on the host since it was last open share one load:
// the second waits for the first one's refresh from the origin, instead
// of loading and refreshing the file itself. Before the fix, the second
// open refreshed it too, installed its node and copied a block up, and
// then the first open's refresh dropped that copy — its data file removed
// and the block cache's count of it gone, while the presence record kept
// it: the cache counted 0 bytes for a present block, and once closed the
// file read the block from no data file.
func TestConcurrentFirstOpen(t *testing.T) {
	ctx := context.Background()
	lower := &gatedLower{memLower: &memLower{files: map[string][]byte{}, mtime: map[string]int64{}}}
	lower.set("f", bytes.Repeat([]byte("o"), 10000), 1)
	v := openVirtual(t, lower)
	ino := must[Attr](t)(v.Lookup(ctx, RootIno, "f")).Ino
	if _, err := v.Open(ctx, ino, false); err != nil {
		t.Fatal(err)
	}
	if err := v.fetch.Block(ctx, v.lookupNode(ino), 1); err != nil { // a copy-up: block 1 present
		t.Fatal(err)
	}
	if err := v.Release(ctx, ino); err != nil {
		t.Fatal(err)
	}

	want := bytes.Repeat([]byte("n"), 10000)
	lower.set("f", want, 2)
	entered, release := lower.arm()
	first := make(chan error, 1)
	go func() {
		_, err := v.Open(ctx, ino, false)
		first <- err
	}()
	<-entered // the first open is refreshing the file from its origin
	second := make(chan error, 1)
	go func() {
		if _, err := v.Open(ctx, ino, false); err != nil {
			second <- err
			return
		}
		second <- v.fetch.Block(ctx, v.lookupNode(ino), 1) // a copy of the new bytes
	}()
	secondDone := false
	select {
	case err := <-second: // it did not wait for the first open's load
		if err != nil {
			t.Fatal(err)
		}
		secondDone = true
	case <-time.After(500 * time.Millisecond): // waiting for it, as it must
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !secondDone {
		if err := <-second; err != nil {
			t.Fatal(err)
		}
	}
	if got := v.openCount(ino); got != 2 {
		t.Fatalf("two opens: %d users of the node", got)
	}
	for range 2 {
		if err := v.Release(ctx, ino); err != nil {
			t.Fatal(err)
		}
	}
	if got := v.blocks.Counted()[ino]; got != 4096 {
		t.Errorf("block cache counts %d bytes for the file's present block 1, want 4096", got)
	}
	if err := v.checkInvariants(); err != nil {
		t.Error(err)
	}
	a := must[Attr](t)(v.Open(ctx, ino, false))
	buf := make([]byte, a.Size)
	n, err := v.Read(ctx, ino, buf, 0)
	if rerr := v.Release(ctx, ino); err == nil {
		err = rerr
	}
	if err != nil || !bytes.Equal(buf[:n], want) {
		t.Errorf("the file reads %d bytes (%v), right: %v; want the origin's new bytes", n, err, bytes.Equal(buf[:n], want))
	}
}
