package ns

import (
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// File type bits of st_mode (POSIX values), and the mode bits a record
// keeps (its type is the record's Type).
const (
	ModeTypeMask = 0o170000
	ModeDir      = 0o040000
	ModeRegular  = 0o100000
	ModeSymlink  = 0o120000
	ModeFIFO     = 0o010000
	ModeSocket   = 0o140000
	ModeCharDev  = 0o020000
	ModeBlockDev = 0o060000
	ModePerm     = 0o7777 // permission, setuid, setgid and sticky bits
	ModeSetgid   = 0o2000
)

// TypeMode returns the st_mode type bits of t.
func TypeMode(t snapshot.EntryType) uint32 {
	switch t {
	case snapshot.TypeDir:
		return ModeDir
	case snapshot.TypeSymlink:
		return ModeSymlink
	case snapshot.TypeFIFO:
		return ModeFIFO
	case snapshot.TypeSocket:
		return ModeSocket
	case snapshot.TypeCharDev:
		return ModeCharDev
	case snapshot.TypeBlockDev:
		return ModeBlockDev
	}
	return ModeRegular
}

// TypeOfMode returns the entry type of st_mode bits, or false for an
// unknown type.
func TypeOfMode(mode uint32) (snapshot.EntryType, bool) {
	switch mode & ModeTypeMask {
	case ModeRegular, 0:
		return snapshot.TypeFile, true
	case ModeDir:
		return snapshot.TypeDir, true
	case ModeSymlink:
		return snapshot.TypeSymlink, true
	case ModeFIFO:
		return snapshot.TypeFIFO, true
	case ModeSocket:
		return snapshot.TypeSocket, true
	case ModeCharDev:
		return snapshot.TypeCharDev, true
	case ModeBlockDev:
		return snapshot.TypeBlockDev, true
	}
	return 0, false
}

// Attr is what stat(2) reports for an inode. Times are nanoseconds since
// the Unix epoch.
type Attr struct {
	Ino   uint64
	Type  snapshot.EntryType
	Mode  uint32 // permission bits (07777) only; see StMode
	Nlink uint32
	Uid   uint32
	Gid   uint32
	Size  uint64
	// Blocks counts 512-byte units of data the file holds (holes excluded,
	// at chunk granularity).
	Blocks uint64
	Atime  int64
	Mtime  int64
	Ctime  int64
	Rdev   uint64
	// Parent is the directory holding the inode's only name (for file
	// handles, which find a directory's parent by it); zero for the root,
	// for hard-linked files and for files with no name.
	Parent uint64
}

// StMode returns the full st_mode: type bits and permission bits.
func (a Attr) StMode() uint32 { return TypeMode(a.Type) | a.Mode }

// AttrOf returns the stat view of record r: a symlink's size is its
// target's length, a directory's is 4096 (8 blocks), a regular file's
// blocks are its size in 512-byte units.
func AttrOf(r *meta.Inode) Attr {
	a := Attr{
		Ino: r.Ino, Type: r.Type, Mode: r.Mode, Nlink: r.Nlink, Uid: r.Uid, Gid: r.Gid,
		Size: r.Size, Atime: r.Atime, Mtime: r.Mtime, Ctime: r.Ctime, Rdev: r.Rdev, Parent: r.Parent,
	}
	switch r.Type {
	case snapshot.TypeSymlink:
		a.Size = uint64(len(r.Target))
	case snapshot.TypeDir:
		a.Size = 4096
		a.Blocks = 8
	case snapshot.TypeFile:
		a.Blocks = (r.Size + 511) / 512
	}
	return a
}
