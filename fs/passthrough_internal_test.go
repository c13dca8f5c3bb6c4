package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/internal/snapshottest"
)

var ptSeq atomic.Int64

// ptFS is a filesystem with passthrough on over a fresh engine volume,
// without a mount: its opens, releases and forgets are called directly.
type ptFS struct {
	*filesystem
	t *testing.T
	w *snapshottest.Workspace
}

func newPtFS(t *testing.T, opts ...func(*cache.Options)) *ptFS {
	_, repo := snapshottest.InitVolume(t, fmt.Sprintf("mem://fs-pt-%d-%d", os.Getpid(), ptSeq.Add(1)))
	w := snapshottest.OpenWorkspace(t, repo, "main", opts...)
	fsys := &filesystem{vol: w.V, log: slog.New(slog.DiscardHandler)}
	fsys.passthrough.Store(true)
	return &ptFS{filesystem: fsys, t: t, w: w}
}

// file writes file name with data and returns its inode.
func (p *ptFS) file(name string, data []byte) uint64 {
	p.t.Helper()
	p.w.WriteFile(name, data)
	a, err := p.w.Lookup(name)
	if err != nil {
		p.t.Fatal(err)
	}
	return a.Ino
}

// openRO opens ino read-only as node.Open does (the engine's open, then
// the io mode); errors go to the returned error, for other goroutines.
func (p *ptFS) openRO(ino uint64) (gofs.FileHandle, error) {
	ctx := context.Background()
	if _, err := p.vol.Open(ctx, ino, false); err != nil {
		return nil, err
	}
	fh, _, errno := p.open(ctx, newHandle(ino, syscall.O_RDONLY), syscall.O_RDONLY)
	if errno != 0 {
		return nil, errno
	}
	return fh, nil
}

// closeFH releases fh as node.Release does.
func (p *ptFS) closeFH(fh gofs.FileHandle) error {
	ctx := context.Background()
	err := p.release(ctx, fh)
	return errors.Join(err, p.vol.Release(ctx, asHandle(fh).ino))
}

// openRefused opens ino read-only, fails the test if the open was pinned
// (the pin budget had room), and releases it.
func (p *ptFS) openRefused(ino uint64) {
	p.t.Helper()
	fh, err := p.openRO(ino)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, ok := fh.(*ptHandle); ok {
		p.t.Fatal("the open was pinned: the pin budget had room")
	}
	if err := p.closeFH(fh); err != nil {
		p.t.Fatal(err)
	}
}

// counts returns the engine's pinned and open files.
func (p *ptFS) counts() (pinned, open int) {
	p.t.Helper()
	st, err := p.vol.Status(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	return st.PinnedFiles, st.OpenFiles
}

// TestUnholdOutsideLock: the end of a held inode's hold at its forget
// (adoption, Unpin, Release) runs without fsys.io.mu, so an open and a
// release of another inode complete while it is held midway; and an open
// of the same inode that comes between the forget's drop of its mode and
// the end of the hold keeps its own pin and engine open.
func TestUnholdOutsideLock(t *testing.T) {
	p := newPtFS(t)
	a := p.file("a", bytes.Repeat([]byte("a"), 200<<10))
	b := p.file("b", bytes.Repeat([]byte("b"), 200<<10))
	fh, err := p.openRO(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fh.(*ptHandle); !ok {
		t.Fatalf("a read-only open of a file whole locally is not passthrough: %T", fh)
	}
	if err := p.closeFH(fh); err != nil { // a is held: its pin and an engine open
		t.Fatal(err)
	}

	midway, resume := make(chan struct{}), make(chan struct{})
	p.io.unholding = func(uint64) { close(midway); <-resume }
	forgot := make(chan struct{})
	go func() { p.forget(a); close(forgot) }()
	<-midway
	reopened := make(chan error, 1)
	var again gofs.FileHandle
	go func() {
		fb, err := p.openRO(b)
		if err == nil {
			err = p.closeFH(fb) // b is held now
		}
		if err == nil {
			again, err = p.openRO(a)
		}
		reopened <- err
	}()
	select {
	case err := <-reopened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a deadlock's bound, not a timing
		close(resume)
		t.Fatal("an open and a release waited for the end of another inode's hold")
	}
	close(resume)
	<-forgot
	p.io.unholding = nil

	ph, ok := again.(*ptHandle)
	if !ok {
		t.Fatalf("the open of a during its forget is not passthrough: %T", again)
	}
	got := make([]byte, 3)
	if _, err := ph.fd.ReadAt(got, 100); err != nil || string(got) != "aaa" {
		t.Errorf("the backing file of a after the end of its old hold: %q, %v", got, err)
	}
	if pinned, open := p.counts(); pinned != 2 || open != 2 {
		t.Errorf("after the old hold of a ended: %d files pinned, %d open; want 2 and 2 (a's new handle, b's hold)", pinned, open)
	}
	if err := p.closeFH(again); err != nil { // a held again
		t.Fatal(err)
	}
	p.forget(a)
	p.forget(b)
	if pinned, open := p.counts(); pinned != 0 || open != 0 {
		t.Errorf("after every forget: %d files pinned, %d open; want none", pinned, open)
	}
}

// hold opens ino read-only through passthrough and releases it, so that
// the inode holds its pin until its forget.
func (p *ptFS) hold(ino uint64) {
	p.t.Helper()
	fh, err := p.openRO(ino)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, ok := fh.(*ptHandle); !ok {
		p.t.Fatalf("a read-only open of inode %d, whole locally, is not passthrough: %T", ino, fh)
	}
	if err := p.closeFH(fh); err != nil {
		p.t.Fatal(err)
	}
}

// TestReclaimRateLimited: an open refused for want of pin room prunes
// the idle held inodes (FUSE_NOTIFY_PRUNE), but not while a prune is
// under way, nor again within pruneInterval of the last, unless a hold
// ended since. The clock is the test's.
func TestReclaimRateLimited(t *testing.T) {
	p := newPtFS(t, func(o *cache.Options) { o.CacheSize = 1 << 20 }) // pins: at most 512 KiB
	a := p.file("a", bytes.Repeat([]byte("a"), 200<<10))
	b := p.file("b", bytes.Repeat([]byte("b"), 200<<10))
	c := p.file("c", bytes.Repeat([]byte("c"), 400<<10)) // never fits beside a or b
	p.hold(a)
	p.hold(b)
	now := time.Unix(1e9, 0)
	asked, answer := make(chan []uint64, 8), make(chan struct{})
	p.io.mu.Lock()
	p.io.now = func() time.Time { return now }
	p.io.prune = func(inos []uint64) fuse.Status {
		asked <- slices.Sorted(slices.Values(inos))
		<-answer
		return fuse.OK
	}
	p.io.mu.Unlock()
	refused := func() {
		t.Helper()
		p.openRefused(c)
	}
	reclaiming := func() bool {
		p.io.mu.Lock()
		defer p.io.mu.Unlock()
		return p.io.reclaiming
	}
	pruned := func(step string, want ...uint64) { // and still under way
		t.Helper()
		select {
		case got := <-asked:
			if !slices.Equal(got, want) {
				t.Errorf("%s: pruned %v, want %v", step, got, want)
			}
		case <-time.After(time.Minute): // a deadlock's bound, not a timing
			t.Fatalf("%s: no prune", step)
		}
	}
	finish := func() { // the prune under way returns; wait for its end
		t.Helper()
		answer <- struct{}{}
		for deadline := time.Now().Add(time.Minute); reclaiming(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the prune did not end")
			}
		}
	}

	refused()
	pruned("first refused open", a, b)
	now = now.Add(2 * pruneInterval)
	refused() // the prune is under way
	finish()
	if len(asked) != 0 {
		t.Errorf("a second prune began while one was under way: %v", <-asked)
	}
	last := now
	refused()
	pruned("past the interval", a, b)
	finish()
	now = last.Add(pruneInterval / 2)
	refused()
	if reclaiming() || len(asked) != 0 {
		t.Errorf("a prune began within the interval of the last one")
	}
	p.forget(a) // a hold ends: room came back
	refused()
	pruned("after a hold ended, within the interval", b)
	finish()
	p.forget(b)
	if pinned, open := p.counts(); pinned != 0 || open != 0 {
		t.Errorf("after every forget: %d files pinned, %d open; want none", pinned, open)
	}
}

// TestReclaimUnsupported: a kernel without FUSE_NOTIFY_PRUNE refuses the
// prune, ENOSYS (go-fuse's answer when the kernel's INIT announced a
// protocol older than 7.45) or EINVAL (the kernel's own, for a notify code
// it does not know): the first open refused for want of pin room asks
// once, later ones do not (past the interval, after a hold ended), the
// refusal is logged once, and every such open is still served, without
// passthrough.
func TestReclaimUnsupported(t *testing.T) {
	for name, st := range map[string]fuse.Status{"ENOSYS": fuse.ENOSYS, "EINVAL": fuse.EINVAL} {
		t.Run(name, func(t *testing.T) {
			p := newPtFS(t, func(o *cache.Options) { o.CacheSize = 1 << 20 }) // pins: at most 512 KiB
			var logged bytes.Buffer
			p.log = slog.New(slog.NewTextHandler(&logged, nil))
			a := p.file("a", bytes.Repeat([]byte("a"), 200<<10))
			b := p.file("b", bytes.Repeat([]byte("b"), 200<<10))
			c := p.file("c", bytes.Repeat([]byte("c"), 400<<10)) // never fits beside a or b
			p.hold(a)
			p.hold(b)
			now := time.Unix(1e9, 0)
			asked := make(chan []uint64, 8)
			p.io.mu.Lock()
			p.io.now = func() time.Time { return now }
			p.io.prune = func(inos []uint64) fuse.Status {
				asked <- inos
				return st
			}
			p.io.mu.Unlock()
			// refused opens c, which finds no pin room, and reports
			// whether that began a reclaim (under way, or done and asked).
			refused := func() bool {
				t.Helper()
				p.openRefused(c)
				p.io.mu.Lock()
				defer p.io.mu.Unlock()
				return p.io.reclaiming || len(asked) > 0
			}
			if !refused() {
				t.Fatal("the first refused open asked no prune")
			}
			select {
			case <-asked:
			case <-time.After(time.Minute): // a deadlock's bound, not a timing
				t.Fatal("no prune")
			}
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
				p.io.mu.Lock()
				done := !p.io.reclaiming
				p.io.mu.Unlock()
				if done {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the prune did not end")
				}
			}
			now = now.Add(2 * pruneInterval)
			if refused() {
				t.Errorf("a refused open past the interval asked again after %v", st)
			}
			p.forget(a) // a hold ends, which lifts the interval
			if refused() {
				t.Errorf("a refused open after a hold ended asked again after %v", st)
			}
			if n := strings.Count(logged.String(), "cannot prune"); n != 1 {
				t.Errorf("the refused prune was logged %d times, want once:\n%s", n, logged.String())
			}
			p.forget(b)
			if pinned, open := p.counts(); pinned != 0 || open != 0 {
				t.Errorf("after every forget: %d files pinned, %d open; want none", pinned, open)
			}
		})
	}
}
