package snapshot

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentfs/agentfs/internal/binenc"
)

// EntryType is the kind of a directory entry.
type EntryType uint8

// Entry types.
const (
	TypeFile     EntryType = 1
	TypeDir      EntryType = 2
	TypeSymlink  EntryType = 3
	TypeFIFO     EntryType = 4
	TypeSocket   EntryType = 5
	TypeCharDev  EntryType = 6
	TypeBlockDev EntryType = 7
)

func (t EntryType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	case TypeFIFO:
		return "fifo"
	case TypeSocket:
		return "socket"
	case TypeCharDev:
		return "chardev"
	case TypeBlockDev:
		return "blockdev"
	}
	return fmt.Sprintf("type(%d)", t)
}

// Xattr is one extended attribute.
type Xattr struct {
	Name  string `json:"name"`
	Value []byte `json:"value"`
}

// Chunk is one stored chunk of a file: it holds the file's bytes from
// Index*ChunkSize for Ref.RawLen bytes. Bytes of the file not covered by a
// chunk (holes, and a chunk's short tail up to the next chunk or the file
// size) read as zeros.
type Chunk struct {
	Index uint64
	Ref   BlobRef
}

// Entry is one entry of a directory tree.
type Entry struct {
	Name  string
	Type  EntryType
	Mode  uint32 // permission bits (07777), without the type
	Uid   uint32
	Gid   uint32
	Size  uint64 // file size; symlink target length; 0 for others
	Atime int64  // nanoseconds since the Unix epoch
	Mtime int64
	Ctime int64
	// Nlink is the link count: for a directory 2 + its subdirectories, for
	// others the number of names the file has in the whole volume.
	Nlink uint32
	// LinkID identifies a hard-link group. In a directory tree, an entry
	// with a non-zero LinkID is one name of a multiply-linked file: it
	// carries only Name, Type and LinkID, and the file itself (attributes,
	// Nlink, chunks) is the entry named LinkName(LinkID) in the commit's
	// link table. A file's data is so stored once, and changing it rewrites
	// the link table, not every directory that names it.
	LinkID uint64
	Rdev   uint64 // device number for TypeCharDev / TypeBlockDev
	Target string // symlink target
	Xattrs []Xattr
	// Directory only: the subtree, and the number of non-directory entries
	// and their total size in the whole subtree (each hard link counted).
	Tree     BlobRef
	SubFiles uint64
	SubBytes uint64
	// File only: chunks in increasing Index order.
	Chunks []Chunk

	// Virtual workspaces over a host directory. HasOrigin says the entry
	// reads through to Origin, a path relative to the host directory ("" is
	// the directory itself). A directory with an origin and a zero Tree is
	// not materialized: its entries are the host directory's. A file with an
	// origin reads its bytes below OriginSize from the host file wherever no
	// chunk covers them (a partial copy-up).
	HasOrigin  bool
	Origin     string
	OriginSize uint64
	// Modified marks an entry that differs from its origin, or that has
	// none: its content, its attributes or, for a directory, its entries.
	Modified bool
}

// Entry flag bits in the encoding.
const (
	entryHasOrigin = 1 << 0
	entryModified  = 1 << 1
)

// ValidateOrigin checks an origin path: "" or a clean relative path with
// no "." or ".." segment.
func ValidateOrigin(p string) error {
	if p == "" {
		return nil
	}
	if strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("origin %q: %w", p, ErrBadName)
	}
	for _, seg := range strings.Split(p, "/") {
		if ValidateEntryName(seg) != nil {
			return fmt.Errorf("origin %q: %w", p, ErrBadName)
		}
	}
	return nil
}

// LinkName returns the name of a hard-link group's entry in a link table:
// the group ID as 16 lowercase hex digits.
func LinkName(id uint64) string { return fmt.Sprintf("%016x", id) }

// treeMagic starts every encoded tree.
const treeMagic = "AFT1"

// ValidateEntryName checks a directory entry name: 1–255 bytes, no '/', no
// NUL, not "." or "..".
func ValidateEntryName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("entry name %q: %w", name, ErrBadName)
	}
	return nil
}

// EncodeTree encodes entries, which must be sorted by name with no
// duplicates (EncodeTree sorts a copy if they are not, and rejects
// duplicates). Equal trees encode to equal bytes.
func EncodeTree(entries []Entry) ([]byte, error) {
	if !slices.IsSortedFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) }) {
		entries = slices.Clone(entries)
		slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	}
	e := binenc.Encoder{B: make([]byte, 0, 64*len(entries)+8)}
	e.Raw([]byte(treeMagic))
	e.Uvarint(uint64(len(entries)))
	for i := range entries {
		en := &entries[i]
		if err := ValidateEntryName(en.Name); err != nil {
			return nil, err
		}
		if i > 0 && entries[i-1].Name == en.Name {
			return nil, fmt.Errorf("duplicate entry name %q: %w", en.Name, ErrBadName)
		}
		e.String(en.Name)
		e.Byte(byte(en.Type))
		e.Uvarint(uint64(en.Mode))
		e.Uvarint(uint64(en.Uid))
		e.Uvarint(uint64(en.Gid))
		e.Uvarint(en.Size)
		e.Varint(en.Atime)
		e.Varint(en.Mtime)
		e.Varint(en.Ctime)
		e.Uvarint(uint64(en.Nlink))
		e.Uvarint(en.LinkID)
		e.Uvarint(en.Rdev)
		e.String(en.Target)
		xs := en.Xattrs
		if !slices.IsSortedFunc(xs, func(a, b Xattr) int { return strings.Compare(a.Name, b.Name) }) {
			xs = slices.Clone(xs)
			slices.SortFunc(xs, func(a, b Xattr) int { return strings.Compare(a.Name, b.Name) })
		}
		e.Uvarint(uint64(len(xs)))
		for _, x := range xs {
			e.String(x.Name)
			e.Bytes(x.Value)
		}
		var flags uint64
		if en.HasOrigin {
			flags |= entryHasOrigin
		}
		if en.Modified {
			flags |= entryModified
		}
		e.Uvarint(flags)
		if en.HasOrigin {
			if err := ValidateOrigin(en.Origin); err != nil {
				return nil, err
			}
			e.String(en.Origin)
			e.Uvarint(en.OriginSize)
		}
		switch en.Type {
		case TypeDir:
			encodeRef(&e, en.Tree)
			e.Uvarint(en.SubFiles)
			e.Uvarint(en.SubBytes)
		case TypeFile:
			e.Uvarint(uint64(len(en.Chunks)))
			var prev uint64
			for j, c := range en.Chunks {
				if j > 0 && c.Index <= prev {
					return nil, fmt.Errorf("entry %q: chunks out of order: %w", en.Name, ErrCorrupt)
				}
				e.Uvarint(c.Index - prev)
				prev = c.Index
				encodeRef(&e, c.Ref)
			}
		}
	}
	return e.B, nil
}

// DecodeTree decodes an encoded tree, validating names, order and types.
func DecodeTree(b []byte) ([]Entry, error) {
	if len(b) < len(treeMagic) || string(b[:len(treeMagic)]) != treeMagic {
		return nil, fmt.Errorf("tree: bad magic: %w", ErrCorrupt)
	}
	d := binenc.Decoder{B: b[len(treeMagic):]}
	n := d.Count(16)
	out := make([]Entry, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		var en Entry
		en.Name = d.String()
		en.Type = EntryType(d.Byte())
		en.Mode = d.Uint32()
		en.Uid = d.Uint32()
		en.Gid = d.Uint32()
		en.Size = d.Uvarint()
		en.Atime = d.Varint()
		en.Mtime = d.Varint()
		en.Ctime = d.Varint()
		en.Nlink = d.Uint32()
		en.LinkID = d.Uvarint()
		en.Rdev = d.Uvarint()
		en.Target = d.String()
		nx := d.Count(2)
		for j := 0; j < nx && d.Err() == nil; j++ {
			x := Xattr{Name: d.String(), Value: d.Bytes()}
			if j > 0 && en.Xattrs[j-1].Name >= x.Name && d.Err() == nil {
				d.Fail("entry %q: xattrs out of order", en.Name)
			}
			en.Xattrs = append(en.Xattrs, x)
		}
		flags := d.Uvarint()
		if flags&^(entryHasOrigin|entryModified) != 0 && d.Err() == nil {
			d.Fail("entry %q: unknown flags %#x", en.Name, flags)
		}
		en.Modified = flags&entryModified != 0
		if flags&entryHasOrigin != 0 {
			en.HasOrigin = true
			en.Origin = d.String()
			en.OriginSize = d.Uvarint()
			if d.Err() == nil && ValidateOrigin(en.Origin) != nil {
				d.Fail("entry %q: bad origin %q", en.Name, en.Origin)
			}
		}
		switch en.Type {
		case TypeDir:
			en.Tree = decodeRef(&d)
			en.SubFiles = d.Uvarint()
			en.SubBytes = d.Uvarint()
		case TypeFile:
			nc := d.Count(1 + 16 + 3 + HashSize)
			var idx uint64
			for j := 0; j < nc && d.Err() == nil; j++ {
				delta := d.Uvarint()
				if j > 0 && delta == 0 && d.Err() == nil {
					d.Fail("entry %q: chunks out of order", en.Name)
				}
				idx += delta
				en.Chunks = append(en.Chunks, Chunk{Index: idx, Ref: decodeRef(&d)})
			}
		case TypeSymlink, TypeFIFO, TypeSocket, TypeCharDev, TypeBlockDev:
		default:
			d.Fail("entry %q: unknown type %d", en.Name, en.Type)
		}
		if d.Err() != nil {
			break
		}
		if err := ValidateEntryName(en.Name); err != nil {
			return nil, fmt.Errorf("tree: %w: %w", ErrCorrupt, err)
		}
		if i > 0 && out[i-1].Name >= en.Name {
			d.Fail("entries out of order at %q", en.Name)
			break
		}
		if en.Mode > 0o7777 {
			d.Fail("entry %q: mode %o has type bits", en.Name, en.Mode)
			break
		}
		out = append(out, en)
	}
	d.End()
	if d.Err() != nil {
		return nil, corrupt("tree", d.Err())
	}
	return out, nil
}
