package cache

import (
	"context"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// This file lets the FUSE layer hand a file's local data file to the
// kernel (FUSE passthrough): reads of a pinned file go straight to its data
// file, without the engine seeing them. A pin is the engine's promise that,
// while it lasts, the data file holds the file's whole current content, at
// its full size, in the same file:
//
//   - eviction leaves a pinned file's blocks alone (evictOpen);
//   - a truncate that grows a pinned file grows its data file too
//     (growPinned), so the kernel reads zeros up to the new size;
//   - a reconcile (restore, discard, a read-only mount following its
//     branch) fetches the new chunks of a pinned file before it changes
//     anything and writes them into the same data file (updateFile,
//     fetchPinned, refillPinned) instead of forgetting them;
//   - a pinned file is never inline (inline files are never pinned, and a
//     reconcile keeps a pinned file out of the database);
//   - removing the file (unlink, a reconcile dropping it) removes the data
//     file's name only: the kernel's reference keeps its bytes, as for any
//     file removed while open.
//
// Writes that come through the engine land in the same data file, so
// pinned readers see them at once.

// PinLocal pins the data file of open regular file ino for passthrough
// and returns a new descriptor of it (the caller closes it), if the file's
// whole content is local: every block dirty, present, or a hole, none
// remote or still on a host base, and the file not inline. Otherwise it
// returns nil and pins nothing. With force, a file already pinned is pinned
// again whatever its state (it stays whole while pinned). Every pin is
// undone by one Unpin.
func (v *Volume) PinLocal(ino uint64, force bool) (*os.File, error) {
	n, err := v.openNode(ino)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if (!force || n.pins == 0) && !v.wholeLocally(n) {
		return nil, nil
	}
	f, err := n.file(true)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cache data file: %w", err)
	}
	switch size := int64(n.rec.Size); {
	case st.Size() < size:
		// Bytes past the held blocks are zeros (holes): growing the file
		// to the size reads the same.
		if err := f.Truncate(size); err != nil {
			return nil, fmt.Errorf("cache data file: %w", err)
		}
	case st.Size() > size:
		return nil, fmt.Errorf("cache data file of inode %d has %d bytes, the file %d: %w", ino, st.Size(), size, ErrIO)
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cache data file: %w", err)
	}
	n.pins++
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// Unpin undoes one PinLocal of open file ino.
func (v *Volume) Unpin(ino uint64) {
	n := v.lookupNode(ino)
	if n == nil {
		return
	}
	n.mu.Lock()
	n.pins = max(n.pins-1, 0)
	n.mu.Unlock()
}

// wholeLocally reports whether every byte of n can be read from its data
// file. Caller holds n.mu.
func (v *Volume) wholeLocally(n *node) bool {
	if n.rec.Type != snapshot.TypeFile || n.rec.Inline {
		return false
	}
	l := n.layout()
	for b := uint64(0); b*v.chunkSize < n.rec.Size; b++ {
		if s := n.d.Source(l, b); s != data.Local && s != data.Hole {
			return false
		}
	}
	return true
}

// growPinned makes the data file of pinned n as long as the file after a
// truncate that grew it. Caller holds n.mu exclusively.
func (v *Volume) growPinned(n *node) error {
	if n.pins == 0 || n.rec.Inline {
		return nil
	}
	f, err := n.file(true)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err == nil && st.Size() >= int64(n.rec.Size) {
		return nil
	}
	if err := f.Truncate(int64(n.rec.Size)); err != nil {
		return fmt.Errorf("cache data file: %w", err)
	}
	return nil
}

// fetchPinned fetches, before a reconcile changes pinned file n to entry
// e, the chunks of e whose bytes n does not keep, by block. Caller holds
// n.mu exclusively.
func (v *Volume) fetchPinned(ctx context.Context, n *node, e *snapshot.Entry, keep map[uint64]bool) (map[uint64][]byte, error) {
	out := map[uint64][]byte{}
	for _, c := range e.Chunks {
		if keep[c.Index] {
			continue
		}
		b, err := v.fetchChunk(ctx, c.Ref)
		if err != nil {
			return nil, fmt.Errorf("refill open file %d: %w", n.ino, err)
		}
		out[c.Index] = b
	}
	return out, nil
}

// refillPinned installs the chunks fetchPinned fetched into the data file
// of pinned n, now that its record is the new one, and grows the data file
// to the new size: the kernel's passthrough readers find the new content
// there. Caller holds n.mu exclusively.
func (v *Volume) refillPinned(n *node, chunks map[uint64][]byte) error {
	for b, p := range chunks {
		if err := n.d.Install(n.layout(), b, p); err != nil {
			return err
		}
	}
	if err := v.growPinned(n); err != nil {
		return err
	}
	return v.persistNode(n)
}

// AdoptPinned takes the data file of pinned open file ino as the truth for
// every block: present blocks and holes become dirty, and every block
// (dirty before or not) gets a new write generation, so that the next
// checkpoint captures the bytes the data file holds now (a hole written to
// is no longer zeros) and a checkpoint that captured a block before this
// call does not mark it clean. Call it when a writer could have changed
// the data file behind the engine (a shared writable mmap through a
// passthrough handle).
func (v *Volume) AdoptPinned(ctx context.Context, ino uint64) error {
	n, err := v.openNode(ino)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pins == 0 || n.rec.Inline {
		return nil
	}
	l := n.layout()
	dirtied := false
	for b := uint64(0); b*v.chunkSize < n.rec.Size; b++ {
		// A pinned file is whole locally: each block is local or a hole.
		if s := n.d.Source(l, b); !n.rec.IsDirty(b) && s != data.Local && s != data.Hole {
			continue
		}
		if !n.rec.IsDirty(b) {
			v.dirtyBlock(n, b)
			dirtied = true
		}
		// Even a block dirty already: a checkpoint may hold a capture of
		// it older than the data file's bytes.
		v.gens.Bump(n.ino, b)
	}
	if !dirtied {
		return nil
	}
	v.markModified(n.rec)
	if err := v.update(func(txn *meta.Txn, d *meta.Delta) error { return v.persistTxn(txn, d, n) }); err != nil {
		return fmt.Errorf("cache database: %w", err)
	}
	n.persisted()
	return nil
}
