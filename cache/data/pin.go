package data

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/snapshot"
)

// This file lets a File's data file be handed to the kernel (FUSE
// passthrough): a pin is the promise that, while it lasts, the data file
// holds the file's whole current content, at its full size, in the same
// file. Evict leaves a pinned file alone, GrowPinned grows its data file
// with the file, Refill writes the new chunks of a changed file into it,
// and its caller keeps a pinned file out of inline storage and never
// removes its data file while pinned. The block cache bounds the pins
// (Cache.Pin): a file the budget has no room for is not pinned.

// ErrDataFile is a data file that does not match its file (longer than the
// file when pinned).
var ErrDataFile = errors.New("data file does not match its file")

// Whole reports whether every byte of the file can be read from its data
// file: it is not inline, and each block is local or a hole (none remote,
// none still reading through to the lower layer).
func (d *File) Whole(l Layout) bool {
	if l.Inline() {
		return false
	}
	for b := uint64(0); b*d.bs < l.Size(); b++ {
		if s := d.Source(l, b); s != Local && s != Hole {
			return false
		}
	}
	return true
}

// Pinned reports whether the data file is pinned.
func (d *File) Pinned() bool { return d.pins > 0 }

// Pin pins the data file for passthrough and returns a new descriptor of
// it (the caller closes it), if the file is Whole and, for its first pin,
// the block cache has room for it (Cache.Pin: the pins' file and byte
// budget); otherwise it returns nil and pins nothing. The data file is
// created if missing and grown to the file's size (bytes past the held
// blocks are zeros, holes: the same read); one longer than the file is
// ErrDataFile. With force, a file already pinned is pinned again whatever
// its state (it stays whole while pinned). Every pin is undone by one
// Unpin.
func (d *File) Pin(l Layout, force bool) (*os.File, error) {
	if (!force || d.pins == 0) && !d.Whole(l) {
		return nil, nil
	}
	first := d.pins == 0
	if first && !d.src.Cache.Pin(d.ino, int64(l.Size())) {
		return nil, nil
	}
	f, err := d.dupData(l)
	if err != nil {
		if first {
			d.src.Cache.Unpin(d.ino)
		}
		return nil, err
	}
	d.pins++
	return f, nil
}

// dupData returns a new descriptor of the data file, created if missing
// and grown to the file's size l.Size() (Pin).
func (d *File) dupData(l Layout) (*os.File, error) {
	f, err := d.OpenData(true)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cache data file: %w", err)
	}
	switch size := int64(l.Size()); {
	case st.Size() < size:
		if err := f.Truncate(size); err != nil {
			return nil, fmt.Errorf("cache data file: %w", err)
		}
	case st.Size() > size:
		return nil, fmt.Errorf("%w: the data file of inode %d has %d bytes, the file %d", ErrDataFile, d.ino, st.Size(), size)
	}
	return dup(f)
}

// DupData returns a new descriptor of the open data file (the caller
// closes it), or nil if the data file is not open: one that a reader can
// use without the file's lock, since closing the File does not close it.
func (d *File) DupData() (*os.File, error) {
	if d.f == nil {
		return nil, nil
	}
	return dup(d.f)
}

// dup returns a new descriptor of f (close-on-exec).
func dup(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cache data file: %w", err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// Unpin undoes one Pin; the last one ends the file's pin in the block
// cache (Cache.Unpin).
func (d *File) Unpin() {
	if d.pins == 1 {
		d.src.Cache.Unpin(d.ino)
	}
	d.pins = max(d.pins-1, 0)
}

// GrowPinned makes the data file of a pinned file as long as the file (of
// size l.Size()), after a truncate that grew it, so that the kernel reads
// zeros up to the new size. Nothing for a file not pinned or inline.
func (d *File) GrowPinned(l Layout) error {
	if d.pins == 0 || l.Inline() {
		return nil
	}
	f, err := d.OpenData(true)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil && st.Size() >= int64(l.Size()) {
		return nil
	}
	if err := f.Truncate(int64(l.Size())); err != nil {
		return fmt.Errorf("cache data file: %w", err)
	}
	return nil
}

// Refill installs chunks, the bytes of the new chunks of a pinned file by
// block (fetched by Fetcher.Chunks before its record changed to l), into
// its data file and grows it to the new size: the kernel's passthrough
// readers find the new content there. The caller persists the presence.
func (d *File) Refill(l Layout, chunks map[uint64][]byte) error {
	for b, p := range chunks {
		if err := d.Install(l, b, p); err != nil {
			return err
		}
	}
	return d.GrowPinned(l)
}

// Adoptable returns the blocks of a pinned file that a writer behind the
// engine (a shared writable mmap through a passthrough handle) may have
// changed in its data file: every block within the file that is local
// (dirty or present) or a hole (a pinned file is whole). The caller
// compares them with the record and makes those that differ dirty, so
// that the data file's bytes are the truth for them. None for a file not
// pinned or inline.
func (d *File) Adoptable(l Layout) []uint64 {
	if d.pins == 0 || l.Inline() {
		return nil
	}
	var out []uint64
	for b := uint64(0); b*d.bs < l.Size(); b++ {
		if s := d.Source(l, b); s == Local || s == Hole {
			out = append(out, b)
		}
	}
	return out
}

// Chunks fetches the chunks among chunks whose block is not in keep, by
// block: the new chunks of a pinned file, fetched before its record
// changes (File.Refill installs them). Errors are Chunk's.
func (f *Fetcher) Chunks(ctx context.Context, chunks []snapshot.Chunk, keep map[uint64]bool) (map[uint64][]byte, error) {
	out := map[uint64][]byte{}
	for _, c := range chunks {
		if keep[c.Index] {
			continue
		}
		b, err := f.Chunk(ctx, c.Ref)
		if err != nil {
			return nil, err
		}
		out[c.Index] = b
	}
	return out, nil
}
