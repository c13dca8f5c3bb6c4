package cache

import (
	"time"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/cache/ns"
	"github.com/agentfs/agentfs/snapshot"
)

// RootIno is the inode number of the volume's root directory.
const RootIno = ns.RootIno

// File type bits of st_mode (POSIX values).
const (
	ModeTypeMask = 0o170000
	ModeDir      = 0o040000
	ModeRegular  = 0o100000
	ModeSymlink  = 0o120000
	ModeFIFO     = 0o010000
	ModeSocket   = 0o140000
	ModeCharDev  = 0o020000
	ModeBlockDev = 0o060000
	ModePerm     = ns.ModePerm // permission, setuid, setgid and sticky bits
	ModeSetgid   = ns.ModeSetgid
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

// Time converts a nanosecond timestamp to time.Time.
func Time(ns int64) time.Time { return time.Unix(0, ns) }

// Cred is the caller's identity, used for the owner of new inodes.
type Cred = ns.Cred

// SetAttrIn lists the attributes SetAttr changes; nil fields are left
// alone (see ns.SetAttrIn).
type SetAttrIn = ns.SetAttrIn

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string
	Ino  uint64
	Type snapshot.EntryType
}

// RenameFlags modify Rename, as renameat2(2) flags do.
type RenameFlags = ns.RenameFlags

// Rename flags.
const (
	// RenameNoReplace fails with ErrExists if the target exists.
	RenameNoReplace = ns.RenameNoReplace
	// RenameExchange atomically swaps source and target, which must both
	// exist.
	RenameExchange = ns.RenameExchange
)

// Xattr set flags, as setxattr(2) takes them.
const (
	XattrCreate  = ns.XattrCreate  // fail with ErrExists if the attribute exists
	XattrReplace = ns.XattrReplace // fail with ErrNoAttr if it does not
)

// Limits enforced by the engine.
const (
	MaxNameLen     = ns.MaxNameLen
	MaxSymlinkLen  = 4095
	MaxXattrName   = ns.MaxXattrName
	MaxXattrValue  = ns.MaxXattrValue
	MaxXattrsTotal = ns.MaxXattrsTotal // all attributes of one inode together
	MaxFileSize    = 1 << 50           // 1 PiB
	// InlineMax is the largest file whose local bytes the engine keeps in
	// its database rather than in a data file of its own (bounded by the
	// volume's chunk size): creating a data file costs a filesystem create,
	// which dominates small-file workloads.
	InlineMax = 64 << 10
)

// StatFs is what statfs(2) reports.
type StatFs struct {
	Bsize   uint32
	Blocks  uint64
	Bfree   uint64
	Bavail  uint64
	Files   uint64
	Ffree   uint64
	NameLen uint32
}

// recordAttr returns the stat view of record n.
func recordAttr(n *meta.Inode) Attr {
	a := Attr{
		Ino: n.Ino, Type: n.Type, Mode: n.Mode, Nlink: n.Nlink, Uid: n.Uid, Gid: n.Gid,
		Size: n.Size, Atime: n.Atime, Mtime: n.Mtime, Ctime: n.Ctime, Rdev: n.Rdev, Parent: n.Parent,
	}
	switch n.Type {
	case snapshot.TypeSymlink:
		a.Size = uint64(len(n.Target))
	case snapshot.TypeDir:
		a.Size = 4096
		a.Blocks = 8
	case snapshot.TypeFile:
		a.Blocks = (n.Size + 511) / 512
	}
	return a
}
