package cache

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

type recordingNotifier struct {
	mu      sync.Mutex
	inodes  []uint64
	entries []string
}

func (r *recordingNotifier) InvalidateInode(ino uint64) error {
	r.mu.Lock()
	r.inodes = append(r.inodes, ino)
	r.mu.Unlock()
	return nil
}

func (r *recordingNotifier) InvalidateEntry(parent uint64, name string) error {
	r.mu.Lock()
	r.entries = append(r.entries, name)
	r.mu.Unlock()
	return nil
}

// TestFollow: a read-only volume follows its branch through rounds of
// changes, ends up identical to the writer each time, keeps the inode
// numbers of unchanged paths, and tells the kernel what changed.
func TestFollow(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	w := openVolume(t, url, "")
	r := openVolume(t, url, "", func(o *Options) { o.ReadOnly = true; o.FollowInterval = -1 })
	note := &recordingNotifier{}
	r.SetNotifier(note)
	big := bytes.Repeat([]byte("big file "), 1<<20) // a data file, 3 chunks
	steps := []func(){
		func() {
			d := must[Attr](t)(w.Mkdir(ctx, RootIno, "src", 0o755, Cred{}))
			writeFile(t, w, d.Ino, "a.go", []byte("package a"))
			writeFile(t, w, d.Ino, "b.go", []byte("package b"))
			writeFile(t, w, RootIno, "big", big)
			must[Attr](t)(w.Mkdir(ctx, d.Ino, "sub", 0o755, Cred{}))
		},
		func() {
			d := must[Attr](t)(w.Lookup(ctx, RootIno, "src"))
			writeFile(t, w, d.Ino, "a.go", []byte("package a // changed"))
			b := must[Attr](t)(w.Lookup(ctx, RootIno, "big"))
			if _, err := w.Open(ctx, b.Ino, false); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(ctx, b.Ino, []byte("CHANGED"), 5<<20); err != nil {
				t.Fatal(err)
			}
			_ = w.Release(ctx, b.Ino)
			if err := w.Unlink(ctx, d.Ino, "b.go"); err != nil {
				t.Fatal(err)
			}
			a := must[Attr](t)(w.Lookup(ctx, d.Ino, "a.go"))
			must[Attr](t)(w.Link(ctx, a.Ino, RootIno, "a-link"))
			if err := w.SetXattr(ctx, d.Ino, "user.k", []byte("v"), 0); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			d := must[Attr](t)(w.Lookup(ctx, RootIno, "src"))
			if err := w.Rename(ctx, d.Ino, "sub", RootIno, "moved", 0); err != nil {
				t.Fatal(err)
			}
			if err := w.Unlink(ctx, RootIno, "a-link"); err != nil {
				t.Fatal(err)
			}
			must[Attr](t)(w.Mkdir(ctx, d.Ino, "b.go", 0o700, Cred{})) // a name changes type
			if err := w.Unlink(ctx, RootIno, "big"); err != nil {
				t.Fatal(err)
			}
		},
	}
	for i, step := range steps {
		// The reader keeps a file open across the change.
		var openIno uint64
		if a, err := r.Lookup(ctx, RootIno, "big"); err == nil {
			openIno = a.Ino
			must[Attr](t)(r.Open(ctx, openIno, false))
		}
		var srcIno uint64
		if a, err := r.Lookup(ctx, RootIno, "src"); err == nil {
			srcIno = a.Ino
		}
		step()
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.follow(ctx); err != nil {
			t.Fatalf("step %d: follow: %v", i, err)
		}
		if got, want := walkAttrs(t, r), walkAttrs(t, w); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: reader differs from writer:\n%v\n%v", i, got, want)
		}
		if srcIno != 0 {
			if a := must[Attr](t)(r.Lookup(ctx, RootIno, "src")); a.Ino != srcIno {
				t.Fatalf("step %d: src changed inode %d -> %d", i, srcIno, a.Ino)
			}
		}
		if openIno != 0 {
			// The open file still reads (the old or the new content).
			buf := make([]byte, 9)
			if n, err := r.Read(ctx, openIno, buf, 0); err != nil || string(buf[:n]) != "big file " {
				t.Fatalf("step %d: open file: %q %v", i, buf[:n], err)
			}
			_ = r.Release(ctx, openIno)
		}
	}
	if _, err := r.Lookup(ctx, RootIno, "big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted file still there: %v", err)
	}
	if len(note.entries) == 0 || len(note.inodes) == 0 {
		t.Fatalf("the kernel was told nothing: %+v", note)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSwitchToDropsLocalChanges: switching a writer to a commit (what a
// restore does) discards what was not committed and leaves nothing dirty.
func TestSwitchToDropsLocalChanges(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	v := openVolume(t, url, "")
	writeFile(t, v, RootIno, "keep", []byte("keep"))
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	base, err := v.repo.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	want := walkAttrs(t, v)
	d := must[Attr](t)(v.Mkdir(ctx, RootIno, "junk", 0o755, Cred{}))
	writeFile(t, v, d.Ino, "x", bytes.Repeat([]byte("x"), 100000))
	writeFile(t, v, RootIno, "keep", []byte("overwritten"))
	// A restore commits the old root as the new head, then switches to it.
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
	if got := walkAttrs(t, v); !reflect.DeepEqual(got, want) {
		t.Fatalf("after switch:\n%v\nwant\n%v", got, want)
	}
	st := must[Status](t)(v.Status(ctx))
	if st.DirtyDirs != 0 || st.DirtyFiles != 0 || st.HeadSeq != c.ID.Seq {
		t.Fatalf("status after switch: %+v", st)
	}
	// New work continues on top of it.
	writeFile(t, v, RootIno, "after", []byte("after"))
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st := must[Status](t)(v.Status(ctx)); st.Branch != "main" || st.HeadSeq != c.ID.Seq+1 {
		t.Fatalf("status after the next sync: %+v", st)
	}
}

// TestFollowKeepsFetchedInlineBytes: a small (inline) file that a
// read-only volume holds open, its block fetched and not yet persisted,
// keeps its bytes when following the branch changes only its attributes:
// its presence record and its inline bytes are stored together, so that
// after reopening the cache it still reads (not ErrIO for inline bytes
// missing).
func TestFollowKeepsFetchedInlineBytes(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	w := openVolume(t, url, "")
	a := writeFile(t, w, RootIno, "small", []byte("hi"))
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ro := func(o *Options) { o.ReadOnly = true; o.FollowInterval = -1 }
	r := openVolume(t, url, dir, ro)
	f := must[Attr](t)(r.Lookup(ctx, RootIno, "small"))
	if _, err := r.Open(ctx, f.Ino, false); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, err := r.Read(ctx, f.Ino, buf, 0); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	mode := uint32(0o600)
	if _, err := w.SetAttr(ctx, a.Ino, SetAttrIn{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.follow(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx, f.Ino); err != nil {
		t.Fatal(err)
	}
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r = openVolume(t, url, dir, ro)
	if got := readFile(t, r, f.Ino); string(got) != "hi" {
		t.Fatalf("after reopening: %q, want hi", got)
	}
}
