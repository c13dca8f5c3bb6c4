package meta

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/internal/binenc"
	"github.com/agentfs/agentfs/snapshot"
)

// Badger key layout (all integers big-endian, so keys sort numerically):
//
//	'i' ino                 → inode record (encodeInode)
//	'd' parent name         → child ino (8 bytes) + entry type (1 byte)
//	't' dir                 → op sequence (8 bytes): dir's tree must be rewritten
//	                          (dir 0 stands for the link table)
//	'w' ino                 → (empty) the file has dirty blocks
//	'h' linkID              → ino of the hard-link group
//	'o' ino                 → (empty) orphan: unlinked while open
//	'p' ino                 → presence bitmap of clean cached blocks
//	'v' ino                 → the local bytes of an inline (small) file
//	'm' name                → volume state (see volume.go)
const (
	PrefixInode     = 'i'
	PrefixDentry    = 'd'
	PrefixTreeMark  = 't'
	PrefixDirtyFile = 'w'
	PrefixLink      = 'h'
	PrefixOrphan    = 'o'
	PrefixPresence  = 'p'
	PrefixInline    = 'v'
	PrefixMeta      = 'm'
)

// RootIno is the inode number of the volume's root directory.
const RootIno uint64 = 1

// LinkTableDir is the pseudo-directory whose tree mark means "rewrite the
// link table".
const LinkTableDir uint64 = 0

// Key64 returns the key of prefix and a number (an inode, a directory,
// a link group).
func Key64(prefix byte, n uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], n)
	return k
}

// DentryKey returns the key of the dentry name in directory parent.
func DentryKey(parent uint64, name string) []byte {
	k := make([]byte, 9, 9+len(name))
	k[0] = PrefixDentry
	binary.BigEndian.PutUint64(k[1:], parent)
	return append(k, name...)
}

// DentryPrefix returns the prefix of every dentry of directory parent.
func DentryPrefix(parent uint64) []byte { return Key64(PrefixDentry, parent) }

// MetaKey returns the key of the volume-state record name.
func MetaKey(name string) []byte { return append([]byte{PrefixMeta}, name...) }

// U64 decodes a big-endian number, 0 if b is shorter than 8 bytes.
func U64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Put64 encodes n big-endian in 8 bytes.
func Put64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

// DentryValue encodes a dentry's value: the child's inode and type.
func DentryValue(ino uint64, t snapshot.EntryType) []byte {
	b := make([]byte, 9)
	binary.BigEndian.PutUint64(b, ino)
	b[8] = byte(t)
	return b
}

// Dentry is one entry of a directory: a dentry's key and value decoded.
type Dentry struct {
	Name string
	Ino  uint64
	Type snapshot.EntryType
}

// ReadDir returns the dentries of directory dir in txn, sorted by name
// (none if dir has none or is no loaded directory).
func ReadDir(txn *Txn, dir uint64) ([]Dentry, error) {
	var out []Dentry
	prefix := DentryPrefix(dir)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		name := string(it.Item().Key()[len(prefix):])
		err := it.Item().Value(func(b []byte) error {
			if len(b) != 9 {
				return fmt.Errorf("dentry %d/%q: value of %d bytes", dir, name, len(b))
			}
			out = append(out, Dentry{Name: name, Ino: U64(b), Type: snapshot.EntryType(b[8])})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Inode is the persistent record of one inode.
type Inode struct {
	Ino    uint64
	Type   snapshot.EntryType
	Mode   uint32 // 07777
	Uid    uint32
	Gid    uint32
	Size   uint64
	Atime  int64
	Mtime  int64
	Ctime  int64
	Nlink  uint32
	Rdev   uint64
	Target string
	Xattrs []snapshot.Xattr // sorted by name
	// Parent is the directory holding this inode's only name. It is zero
	// for the root, for hard-link groups (LinkID != 0: their names may lie
	// in directories not loaded yet) and for orphans.
	Parent uint64
	LinkID uint64

	// Directories.
	Loaded   bool             // children are materialized as dentries
	Tree     snapshot.BlobRef // base or last committed tree (valid when not dirty)
	SubFiles uint64
	SubBytes uint64

	// Regular files.
	Chunks []snapshot.Chunk // committed chunks, by Index
	Dirty  []uint64         // sorted block indexes whose local bytes are newer than Chunks
	// Inline: the file's local bytes (it has only block 0) live in the
	// database under 'v' ino instead of a data file. Small files start
	// inline; a file that grows past the inline limit moves to a data file
	// for good.
	Inline bool

	// Virtual workspaces over a host directory: the path the inode reads
	// through to (see snapshot.Entry), and whether it differs from it.
	HasOrigin  bool
	Origin     string
	OriginSize uint64
	// Mod: the inode's content, attributes or (directories) entries were
	// changed since it was loaded from its base.
	Mod bool
}

const recVersion = 1

// EncodeInode encodes n as the value of its inode key.
func EncodeInode(n *Inode) []byte {
	e := binenc.Encoder{B: make([]byte, 0, 96+len(n.Chunks)*70)}
	e.Byte(recVersion)
	e.Uvarint(n.Ino)
	e.Byte(byte(n.Type))
	e.Uvarint(uint64(n.Mode))
	e.Uvarint(uint64(n.Uid))
	e.Uvarint(uint64(n.Gid))
	e.Uvarint(n.Size)
	e.Varint(n.Atime)
	e.Varint(n.Mtime)
	e.Varint(n.Ctime)
	e.Uvarint(uint64(n.Nlink))
	e.Uvarint(n.Rdev)
	e.String(n.Target)
	e.Uvarint(uint64(len(n.Xattrs)))
	for _, x := range n.Xattrs {
		e.String(x.Name)
		e.Bytes(x.Value)
	}
	e.Uvarint(n.Parent)
	e.Uvarint(n.LinkID)
	e.Bool(n.Loaded)
	e.B = snapshot.EncodeRef(e.B, n.Tree)
	e.Uvarint(n.SubFiles)
	e.Uvarint(n.SubBytes)
	e.Uvarint(uint64(len(n.Chunks)))
	for _, c := range n.Chunks {
		e.Uvarint(c.Index)
		e.B = snapshot.EncodeRef(e.B, c.Ref)
	}
	e.Uvarint(uint64(len(n.Dirty)))
	for _, b := range n.Dirty {
		e.Uvarint(b)
	}
	e.Bool(n.Inline)
	e.Bool(n.HasOrigin)
	e.String(n.Origin)
	e.Uvarint(n.OriginSize)
	e.Bool(n.Mod)
	return e.B
}

// DecodeInode decodes an inode record. Its error says what is wrong with
// the record; the engine reports it as its ErrIO.
func DecodeInode(b []byte) (*Inode, error) {
	d := binenc.Decoder{B: b}
	if v := d.Byte(); v != recVersion && d.Err() == nil {
		return nil, fmt.Errorf("inode record version %d", v)
	}
	n := &Inode{}
	n.Ino = d.Uvarint()
	n.Type = snapshot.EntryType(d.Byte())
	n.Mode = d.Uint32()
	n.Uid = d.Uint32()
	n.Gid = d.Uint32()
	n.Size = d.Uvarint()
	n.Atime = d.Varint()
	n.Mtime = d.Varint()
	n.Ctime = d.Varint()
	n.Nlink = d.Uint32()
	n.Rdev = d.Uvarint()
	n.Target = d.String()
	nx := d.Count(2)
	for i := 0; i < nx; i++ {
		n.Xattrs = append(n.Xattrs, snapshot.Xattr{Name: d.String(), Value: d.Bytes()})
	}
	n.Parent = d.Uvarint()
	n.LinkID = d.Uvarint()
	n.Loaded = d.Bool()
	n.Tree = snapshot.DecodeRef(&d)
	n.SubFiles = d.Uvarint()
	n.SubBytes = d.Uvarint()
	nc := d.Count(2)
	for i := 0; i < nc; i++ {
		idx := d.Uvarint()
		n.Chunks = append(n.Chunks, snapshot.Chunk{Index: idx, Ref: snapshot.DecodeRef(&d)})
	}
	nd := d.Count(1)
	for i := 0; i < nd; i++ {
		n.Dirty = append(n.Dirty, d.Uvarint())
	}
	n.Inline = d.Bool()
	n.HasOrigin = d.Bool()
	n.Origin = d.String()
	n.OriginSize = d.Uvarint()
	n.Mod = d.Bool()
	d.End()
	if d.Err() != nil {
		return nil, fmt.Errorf("inode record: %w", d.Err())
	}
	return n, nil
}

// Clone returns a deep copy of n.
func (n *Inode) Clone() *Inode {
	c := *n
	c.Xattrs = slices.Clone(n.Xattrs)
	c.Chunks = slices.Clone(n.Chunks)
	c.Dirty = slices.Clone(n.Dirty)
	return &c
}

// Chunk returns the committed chunk of block idx.
func (n *Inode) Chunk(idx uint64) (snapshot.BlobRef, bool) {
	i, ok := slices.BinarySearchFunc(n.Chunks, idx, func(c snapshot.Chunk, t uint64) int { return cmp.Compare(c.Index, t) })
	if !ok {
		return snapshot.BlobRef{}, false
	}
	return n.Chunks[i].Ref, true
}

// SetChunk records ref as the committed chunk of block idx.
func (n *Inode) SetChunk(idx uint64, ref snapshot.BlobRef) {
	i, ok := slices.BinarySearchFunc(n.Chunks, idx, func(c snapshot.Chunk, t uint64) int { return cmp.Compare(c.Index, t) })
	if ok {
		n.Chunks[i].Ref = ref
		return
	}
	n.Chunks = slices.Insert(n.Chunks, i, snapshot.Chunk{Index: idx, Ref: ref})
}

// DropChunksFrom removes committed chunks and dirty marks of blocks >= idx.
func (n *Inode) DropChunksFrom(idx uint64) {
	i, _ := slices.BinarySearchFunc(n.Chunks, idx, func(c snapshot.Chunk, t uint64) int { return cmp.Compare(c.Index, t) })
	n.Chunks = n.Chunks[:i]
	j, _ := slices.BinarySearch(n.Dirty, idx)
	n.Dirty = n.Dirty[:j]
}

// IsDirty says whether block idx is marked dirty.
func (n *Inode) IsDirty(idx uint64) bool {
	_, ok := slices.BinarySearch(n.Dirty, idx)
	return ok
}

// AddDirty marks block idx dirty.
func (n *Inode) AddDirty(idx uint64) {
	i, ok := slices.BinarySearch(n.Dirty, idx)
	if !ok {
		n.Dirty = slices.Insert(n.Dirty, i, idx)
	}
}

// RemoveDirty clears block idx's dirty mark.
func (n *Inode) RemoveDirty(idx uint64) {
	if i, ok := slices.BinarySearch(n.Dirty, idx); ok {
		n.Dirty = slices.Delete(n.Dirty, i, i+1)
	}
}

// Xattr returns the value of extended attribute name, or false.
func (n *Inode) Xattr(name string) ([]byte, bool) {
	i, ok := slices.BinarySearchFunc(n.Xattrs, name, func(x snapshot.Xattr, t string) int { return cmp.Compare(x.Name, t) })
	if !ok {
		return nil, false
	}
	return n.Xattrs[i].Value, true
}

// Entry converts a record into a tree entry (without name, tree or chunks
// for directories and files; the checkpointer fills those).
func (n *Inode) Entry(name string) snapshot.Entry {
	e := snapshot.Entry{
		Name: name, Type: n.Type, Mode: n.Mode, Uid: n.Uid, Gid: n.Gid, Size: n.Size,
		Atime: n.Atime, Mtime: n.Mtime, Ctime: n.Ctime, Nlink: n.Nlink, Rdev: n.Rdev,
		Target: n.Target, Xattrs: n.Xattrs, LinkID: n.LinkID,
		HasOrigin: n.HasOrigin, Origin: n.Origin, OriginSize: n.OriginSize, Modified: n.Mod,
	}
	switch n.Type {
	case snapshot.TypeFile:
	case snapshot.TypeSymlink:
		e.Size = uint64(len(n.Target))
	default:
		e.Size = 0
	}
	return e
}

// InodeFromEntry builds the record of a tree entry loaded into directory
// parent. Files up to inlineMax bytes keep their local bytes inline.
func InodeFromEntry(ino, parent uint64, e *snapshot.Entry, inlineMax uint64) *Inode {
	n := &Inode{
		Ino: ino, Type: e.Type, Mode: e.Mode, Uid: e.Uid, Gid: e.Gid, Size: e.Size,
		Atime: e.Atime, Mtime: e.Mtime, Ctime: e.Ctime, Nlink: e.Nlink, Rdev: e.Rdev,
		Target: e.Target, Xattrs: e.Xattrs, Parent: parent, LinkID: e.LinkID,
		HasOrigin: e.HasOrigin, Origin: e.Origin, OriginSize: e.OriginSize, Mod: e.Modified,
	}
	switch e.Type {
	case snapshot.TypeDir:
		n.Tree, n.SubFiles, n.SubBytes = e.Tree, e.SubFiles, e.SubBytes
		n.LinkID = 0
	case snapshot.TypeFile:
		n.Chunks = e.Chunks
		n.Inline = e.Size <= inlineMax
	}
	if n.LinkID != 0 {
		n.Parent = 0
	}
	return n
}
