package commit

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// ErrInconsistent: the namespace's records contradict each other where a
// checkpoint reads them (a dirty block that was not captured, a directory
// without a tree). It means a bug or a damaged cache directory; the engine
// reports it as its ErrIO.
var ErrInconsistent = errors.New("inconsistent namespace records")

// Dir is a directory's tree as a checkpoint built it, with the totals its
// entry in its parent records.
type Dir struct {
	Ref      snapshot.BlobRef
	SubFiles uint64
	SubBytes uint64
	// Mod: the directory differs from its host origin (or has none). An
	// unmodified directory of a host base is stored as its origin alone.
	Mod bool
}

// Builder encodes the trees of changed directories and the link table
// from the namespace's records into an Uploader's packs. Its methods read
// the records in the transaction they are given, under the engine's
// namespace lock (held by the caller), and are not safe for concurrent use.
type Builder struct {
	// Up receives the encoded trees and holds the captured blocks.
	Up *Uploader
	// ChunkSize is the volume's block size.
	ChunkSize uint64
	// ReadsThrough: the volume reads through to a lower layer (a virtual
	// workspace over a host directory); entries record what differs from
	// it.
	ReadsThrough bool
	// Record returns the current record of ino, read in txn: an open
	// file's in-memory record (a private copy) or the stored one; false
	// if ino has no record. Its errors are passed on as they are.
	Record func(txn *meta.Txn, ino uint64) (*meta.Inode, bool, error)
}

// FileEntry returns the tree entry named name of record r; for a regular
// file, its chunks are the committed ones with the captured copies of its
// dirty blocks in place (a hole drops its chunk). A dirty block within the
// file's size that was not captured is ErrInconsistent.
func (b *Builder) FileEntry(r *meta.Inode, name string) (snapshot.Entry, error) {
	e := r.Entry(name)
	if r.Type != snapshot.TypeFile {
		return e, nil
	}
	chunks := slices.Clone(r.Chunks)
	for _, i := range r.Dirty {
		if i*b.ChunkSize >= r.Size {
			continue
		}
		ub, ok := b.Up.Block(BlockKey{r.Ino, i})
		if !ok {
			return e, fmt.Errorf("file %d block %d was not captured: %w", r.Ino, i, ErrInconsistent)
		}
		at, found := slices.BinarySearchFunc(chunks, i, func(c snapshot.Chunk, t uint64) int { return cmp.Compare(c.Index, t) })
		switch {
		case ub.Zero && found:
			chunks = slices.Delete(chunks, at, at+1)
		case ub.Zero:
		case found:
			chunks[at].Ref = ub.Ref
		default:
			chunks = slices.Insert(chunks, at, snapshot.Chunk{Index: i, Ref: ub.Ref})
		}
	}
	// Chunks wholly past the end (possible only after a crash) are dropped.
	for len(chunks) > 0 && chunks[len(chunks)-1].Index*b.ChunkSize >= r.Size {
		chunks = chunks[:len(chunks)-1]
	}
	e.Chunks = chunks
	return e, nil
}

// Trees encodes the trees of the directories in order, whose records are
// in recs, recording each in built: a directory's children that are in
// order must come before it (deepest first).
func (b *Builder) Trees(txn *meta.Txn, order []uint64, recs map[uint64]*meta.Inode, built map[uint64]Dir) error {
	for _, ino := range order {
		d, err := b.Dir(txn, recs[ino], built)
		if err != nil {
			return err
		}
		built[ino] = d
	}
	return nil
}

// Dir encodes the tree of directory r from its dentries, taking the trees
// of child directories from built when they are there (rebuilt by this
// checkpoint), else from their records. A directory not loaded keeps its
// tree; a tree equal to the stored one is not added again.
func (b *Builder) Dir(txn *meta.Txn, r *meta.Inode, built map[uint64]Dir) (Dir, error) {
	var entries []snapshot.Entry
	var bd Dir
	if !r.Loaded {
		// Marked only for its own attributes: its entries are unchanged.
		return Dir{Ref: r.Tree, SubFiles: r.SubFiles, SubBytes: r.SubBytes, Mod: r.Mod || !r.Tree.IsZero()}, nil
	}
	bd.Mod = r.Mod || !r.HasOrigin
	dentries, err := meta.ReadDir(txn, r.Ino)
	if err != nil {
		return bd, fmt.Errorf("directory %d: %w", r.Ino, err)
	}
	for _, de := range dentries {
		name, child := de.Name, de.Ino
		cr, ok, err := b.Record(txn, child)
		if err == nil && !ok {
			err = fmt.Errorf("inode %d has no record: %w", child, ErrInconsistent)
		}
		if err != nil {
			return bd, fmt.Errorf("entry %q of directory %d: %w", name, r.Ino, err)
		}
		switch {
		case cr.Type == snapshot.TypeDir:
			e := cr.Entry(name)
			childMod := false
			if d, ok := built[child]; ok {
				e.Tree, e.SubFiles, e.SubBytes = d.Ref, d.SubFiles, d.SubBytes
				childMod = d.Mod
			} else {
				e.Tree, e.SubFiles, e.SubBytes = cr.Tree, cr.SubFiles, cr.SubBytes
				childMod = cr.Mod || !cr.Tree.IsZero()
			}
			if e.Tree.IsZero() && !e.HasOrigin {
				return bd, fmt.Errorf("directory %q (%d) has no tree: %w", name, child, ErrInconsistent)
			}
			e.Modified = childMod && b.ReadsThrough
			bd.Mod = bd.Mod || childMod
			bd.SubFiles += e.SubFiles
			bd.SubBytes += e.SubBytes
			entries = append(entries, e)
		case cr.LinkID != 0:
			entries = append(entries, snapshot.Entry{Name: name, Type: cr.Type, LinkID: cr.LinkID})
			bd.Mod = true
			bd.SubFiles++
			if cr.Type == snapshot.TypeFile {
				bd.SubBytes += cr.Size
			}
		default:
			e, err := b.FileEntry(cr, name)
			if err != nil {
				return bd, err
			}
			bd.Mod = bd.Mod || cr.Mod || !cr.HasOrigin
			entries = append(entries, e)
			bd.SubFiles++
			if cr.Type == snapshot.TypeFile {
				bd.SubBytes += cr.Size
			}
		}
	}
	if !bd.Mod && b.ReadsThrough && r.HasOrigin {
		// Nothing differs from the lower's directory: store the origin
		// only (a zero tree); the directory reads through to it again.
		bd.Ref = snapshot.BlobRef{}
		return bd, nil
	}
	raw, err := snapshot.EncodeTree(entries)
	if err != nil {
		return bd, fmt.Errorf("directory %d: %w", r.Ino, err)
	}
	if !r.Tree.IsZero() && b.Up.repo.HashOf(raw) == r.Tree.Hash {
		bd.Ref = r.Tree // unchanged (a change undone): no new copy
		return bd, nil
	}
	bd.Ref = b.Up.Add(snapshot.BlobTree, raw)
	return bd, nil
}

// LinkTable encodes the link table from the hard-link groups (their
// records, with their captured blocks); nil when there is no group with a
// name.
func (b *Builder) LinkTable(txn *meta.Txn) (*snapshot.BlobRef, error) {
	var entries []snapshot.Entry
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{meta.PrefixLink}, PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		id := meta.U64(it.Item().Key()[1:])
		var ino uint64
		_ = it.Item().Value(func(val []byte) error { ino = meta.U64(val); return nil })
		r, ok, err := b.Record(txn, ino)
		if err == nil && !ok {
			err = fmt.Errorf("inode %d has no record: %w", ino, ErrInconsistent)
		}
		if err != nil {
			return nil, fmt.Errorf("hard-link group %x: %w", id, err)
		}
		if r.Nlink == 0 {
			continue
		}
		e, err := b.FileEntry(r, snapshot.LinkName(id))
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	raw, err := snapshot.EncodeTree(entries)
	if err != nil {
		return nil, fmt.Errorf("link table: %w", err)
	}
	ref := b.Up.Add(snapshot.BlobTree, raw)
	return &ref, nil
}

// Root returns the root directory of a commit from the root's record r
// and its tree as built.
func (b *Builder) Root(r *meta.Inode, d Dir) snapshot.RootDir {
	return snapshot.RootDir{Mode: r.Mode, Uid: r.Uid, Gid: r.Gid, Atime: r.Atime, Mtime: r.Mtime,
		Ctime: r.Ctime, Nlink: r.Nlink, Xattrs: r.Xattrs, Tree: d.Ref, SubFiles: d.SubFiles, SubBytes: d.SubBytes,
		HasOrigin: r.HasOrigin, Modified: d.Mod && b.ReadsThrough}
}
