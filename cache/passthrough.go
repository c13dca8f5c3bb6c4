package cache

import (
	"context"
	"fmt"
	"os"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// This file lets the FUSE layer hand a file's local data file to the
// kernel (FUSE passthrough): reads of a pinned file go straight to its data
// file, without the engine seeing them. A pin is the engine's promise that,
// while it lasts, the data file holds the file's whole current content, at
// its full size, in the same file. What that means for the file's local
// data is data.File's (Pin, Whole, GrowPinned, Refill, Adoptable, and
// Evict passing a pinned file over); what it means for the record is here:
//
//   - eviction leaves a pinned file's blocks alone (data.File.Evict);
//   - a truncate that grows a pinned file grows its data file too
//     (data.File.GrowPinned), so the kernel reads zeros up to the new size;
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
// A pin lives on an open node: the FUSE layer keeps an open of the file
// for as long as it keeps a pin, which is until the kernel forgets the
// inode, since a mapping of the data file outlives the handle that made
// it. Writes that come through the engine land in the same data file, so
// pinned readers and mappings see them at once. A shared writable mapping
// writes the data file behind the engine; AdoptPinned records such
// writes when the FUSE layer calls it.

// PinLocal pins the data file of open regular file ino for passthrough
// and returns a new descriptor of it (the caller closes it), if the file's
// whole content is local: every block dirty, present, or a hole, none
// remote or still on a host base, and the file not inline. Otherwise it
// returns nil and pins nothing. With force, a file already pinned is pinned
// again whatever its state (it stays whole while pinned). Every pin is
// undone by one Unpin. A data file longer than the file is ErrIO.
func (v *Volume) PinLocal(ino uint64, force bool) (*os.File, error) {
	n, err := v.openNode(ino)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err := n.d.Pin(n.Layout(), force)
	return f, ioErr(err)
}

// Unpin undoes one PinLocal of open file ino.
func (v *Volume) Unpin(ino uint64) {
	n := v.lookupNode(ino)
	if n == nil {
		return
	}
	n.mu.Lock()
	n.d.Unpin()
	n.mu.Unlock()
}

// fetchPinned fetches, before a reconcile changes pinned file n to entry
// e, the chunks of e whose bytes n does not keep, by block
// (data.Fetcher.Chunks). Caller holds n.mu exclusively.
func (v *Volume) fetchPinned(ctx context.Context, n *node, e *snapshot.Entry, keep map[uint64]bool) (map[uint64][]byte, error) {
	chunks, err := v.fetch.Chunks(ctx, e.Chunks, keep)
	if err != nil {
		return nil, fmt.Errorf("refill open file %d: %w", n.ino, ioErr(err))
	}
	return chunks, nil
}

// refillPinned installs the chunks fetchPinned fetched into the data file
// of pinned n, now that its record is the new one (data.File.Refill), and
// persists its presence. Caller holds n.mu exclusively.
func (v *Volume) refillPinned(n *node, chunks map[uint64][]byte) error {
	if err := n.d.Refill(n.Layout(), chunks); err != nil {
		return err
	}
	return v.persistNode(n)
}

// AdoptPinned takes the data file of pinned open file ino as the truth for
// every block (data.File.Adoptable): present blocks and holes become
// dirty, and every block (dirty before or not) gets a new write
// generation, so that the next checkpoint captures the bytes the data file
// holds now (a hole written to is no longer zeros) and a checkpoint that
// captured a block before this call does not mark it clean. Call it when a
// writer could have changed the data file behind the engine (a shared
// writable mmap through a passthrough handle).
func (v *Volume) AdoptPinned(ctx context.Context, ino uint64) error {
	n, err := v.openNode(ino)
	if err != nil {
		return err
	}
	v.lockData(n)
	defer v.unlockData(n)
	dirtied := false
	for _, b := range n.d.Adoptable(n.Layout()) {
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
