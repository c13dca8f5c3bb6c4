package cache

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/cache/ns"
	"github.com/agentfs/agentfs/snapshot"
)

// checkInvariants returns what of the engine's cross-part invariants does
// not hold, with the volume's writers held off (the checkpoint, the
// namespace and the mark locks, in the lock order): the cache database's
// write-behind layer and read cache agree with Badger
// (meta.DB.CheckInvariants), the dirty set mirrors exactly the tree marks
// and the dirty-file index in the database (meta.DirtySet.CheckInvariants),
// the block cache's own invariants (data.Cache.CheckInvariants) hold, and so
// do every open file's, which is a regular file (data.File.CheckInvariants,
// with the block cache's count of it), whose present blocks are those of its presence record
// unless it has changes not yet persisted; every closed file's presence
// record agrees with its inode record and the block cache's count of it
// (checkClosedFiles); every block generation names a dirty block
// (checkGens); and the namespace's records agree with its dentries
// (ns.CheckInvariants). The model test calls it after
// every step, so that a part split off the engine keeps the state it shares
// with the others consistent.
func (v *Volume) checkInvariants() error {
	if err := v.blocks.CheckInvariants(); err != nil {
		return fmt.Errorf("block cache: %w", err)
	}
	v.cpMu.Lock()
	defer v.cpMu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.checkOpenFiles(); err != nil {
		return err
	}
	if err := v.checkClosedFiles(); err != nil {
		return err
	}
	if err := v.checkGens(); err != nil {
		return err
	}
	if err := ns.CheckInvariants(v.db); err != nil {
		return err
	}
	v.markMu.Lock()
	defer v.markMu.Unlock()
	if err := v.db.CheckInvariants(); err != nil {
		return err
	}
	return v.dirty.CheckInvariants(v.db)
}

// checkOpenFiles checks that every open file is a regular file, and its
// data state against its record and its presence record. Caller holds v.mu exclusively (node.mu
// comes after it in the lock order).
func (v *Volume) checkOpenFiles() error {
	v.nodesMu.Lock()
	nodes := slices.Collect(maps.Values(v.nodes))
	v.nodesMu.Unlock()
	for _, n := range nodes {
		n.mu.RLock()
		err := n.d.CheckInvariants(n.Layout())
		if err == nil && n.rec.Type != snapshot.TypeFile {
			// A directory is never an open file: what makes recOf take
			// no node.mu for one (commit.Applier's directories).
			err = fmt.Errorf("file %d: an open node of type %v; nodes are regular files", n.ino, n.rec.Type)
		}
		if err == nil && !n.d.PresenceDirty() {
			var stored []uint64
			err = v.db.View(func(txn *meta.Txn) error {
				var err error
				stored, _, err = data.StoredPresence(meta.FileRecords{Txn: txn}, n.ino)
				return err
			})
			held := slices.Sorted(maps.Keys(n.d.Present()))
			if err == nil && !slices.Equal(held, stored) {
				err = fmt.Errorf("file %d: present blocks %v, its presence record %v", n.ino, held, stored)
			}
		}
		n.mu.RUnlock()
		if err != nil {
			return fmt.Errorf("open file: %w", err)
		}
	}
	return nil
}

// checkClosedFiles checks every file that is not open and has a presence
// record: its inode record exists, and the data state read from its
// records (data.Sources.LoadFile: an inline file's inline bytes are stored
// if block 0 is present) keeps data.File's invariants against it
// (data.File.CheckInvariants: no present block dirty or wholly past the
// end, an inline file with at most block 0 present and inline bytes no
// longer than the file, and the block cache counting for the file exactly
// the extents of its present blocks at its size). And the block cache counts
// nothing for a closed file without a presence record. Caller holds v.mu
// exclusively (no file opens or closes meanwhile).
func (v *Volume) checkClosedFiles() error {
	stored := map[uint64]bool{} // closed files with a presence record
	err := v.db.View(func(txn *meta.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{meta.PrefixPresence}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			ino := meta.U64(it.Item().Key()[1:])
			if v.lookupNode(ino) != nil {
				continue
			}
			stored[ino] = true
			if err := v.checkClosedFile(txn, ino); err != nil {
				return fmt.Errorf("closed file %d: %w", ino, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for ino, n := range v.blocks.Counted() {
		if v.lookupNode(ino) == nil && !stored[ino] {
			return fmt.Errorf("block cache: closed file %d counts %d bytes, its presence record holds 0", ino, n)
		}
	}
	return nil
}

// checkClosedFile checks closed file ino's records (see checkClosedFiles).
func (v *Volume) checkClosedFile(txn *meta.Txn, ino uint64) error {
	r, err := ns.ReadInode(txn, ino)
	if err != nil {
		present, _, _ := data.StoredPresence(meta.FileRecords{Txn: txn}, ino)
		return fmt.Errorf("a presence record %v without its inode: %w", present, err)
	}
	d, err := v.data.LoadFile(ino, meta.FileLayout{R: r}, meta.FileRecords{Txn: txn})
	if err != nil {
		return err
	}
	return d.CheckInvariants(meta.FileLayout{R: r})
}

// checkGens checks the write generations of dirty blocks
// (commit.Gens.CheckInvariants): each names a block that is dirty in its
// file's record (an open file's, else the stored one). Caller holds v.cpMu
// and v.mu exclusively.
func (v *Volume) checkGens() error { return v.gens.CheckInvariants(v.blockDirty) }

// blockDirty reports whether block b of file ino is dirty in its record.
func (v *Volume) blockDirty(ino, b uint64) (bool, error) {
	if n := v.lookupNode(ino); n != nil {
		n.mu.RLock()
		defer n.mu.RUnlock()
		return n.rec.IsDirty(b), nil
	}
	var dirty bool
	err := v.db.View(func(txn *meta.Txn) error {
		r, err := ns.ReadInode(txn, ino)
		if err == nil {
			dirty = r.IsDirty(b)
		}
		return err
	})
	return dirty, err
}

// TestInvariantsCatch breaks each invariant that checkInvariants adds to
// the parts' own by hand, on a volume where they hold, and sees it caught.
func TestInvariantsCatch(t *testing.T) {
	ctx := context.Background()
	// setup returns a volume with a closed file "clean" of 10000 bytes
	// whose blocks are committed and present (read back after a sync),
	// and a closed file "dirty" of 10000 bytes written since.
	setup := func(t *testing.T) (v *Volume, clean, dirty uint64) {
		url, dir := testStoreURL(t), t.TempDir()
		initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 4096 })
		v = openVolume(t, url, dir)
		clean = writeFile(t, v, RootIno, "clean", bytes.Repeat([]byte("c"), 10000)).Ino
		if err := v.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if err := v.Close(ctx); err != nil {
			t.Fatal(err)
		}
		v = openVolume(t, url, dir)
		readFile(t, v, clean) // fetches every block: present
		dirty = writeFile(t, v, RootIno, "dirty", bytes.Repeat([]byte("d"), 10000)).Ino
		if err := v.checkInvariants(); err != nil {
			t.Fatalf("before breaking anything: %v", err)
		}
		return v, clean, dirty
	}
	setPresence := func(t *testing.T, v *Volume, ino uint64, blocks ...uint64) {
		p := map[uint64]bool{}
		for _, b := range blocks {
			p[b] = true
		}
		if err := v.db.Update(func(txn *meta.Txn) error {
			return txn.Set(meta.Key64(meta.PrefixPresence, ino), data.EncodePresence(p))
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		mess func(t *testing.T, v *Volume, clean, dirty uint64)
		want string
	}{
		{"generation of a clean block", func(t *testing.T, v *Volume, clean, _ uint64) {
			v.gens.Bump(clean, 0)
		}, "is not dirty"},
		{"generation of a deleted file", func(t *testing.T, v *Volume, _, dirty uint64) {
			v.gens.Bump(dirty+1000, 0)
		}, "no such file"},
		{"closed file present and dirty", func(t *testing.T, v *Volume, _, dirty uint64) {
			setPresence(t, v, dirty, 1)
		}, "both present and dirty"},
		{"closed file present past the end", func(t *testing.T, v *Volume, clean, _ uint64) {
			setPresence(t, v, clean, 0, 1, 2, 3)
		}, "past the end"},
		{"presence without its inode", func(t *testing.T, v *Volume, _, dirty uint64) {
			setPresence(t, v, dirty+1000, 0)
		}, "without its inode"},
		{"closed file counted beyond its blocks", func(t *testing.T, v *Volume, clean, _ uint64) {
			v.blocks.Add(clean, 1)
		}, "closed file"},
		{"closed file counted without blocks", func(t *testing.T, v *Volume, _, dirty uint64) {
			v.blocks.Add(dirty, 4096)
		}, "presence record holds 0"},
		{"open file counted beyond its blocks", func(t *testing.T, v *Volume, clean, _ uint64) {
			if _, err := v.Open(ctx, clean, false); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = v.Release(ctx, clean) })
			v.blocks.Add(clean, 1)
		}, "open file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, clean, dirty := setup(t)
			tc.mess(t, v, clean, dirty)
			if err := v.checkInvariants(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkInvariants = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
