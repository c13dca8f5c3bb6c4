package cache

import (
	"time"

	"github.com/agentfs/agentfs/cache/ns"
	"github.com/agentfs/agentfs/snapshot"
)

// RootIno is the inode number of the volume's root directory.
const RootIno = ns.RootIno

// File type bits of st_mode (POSIX values).
const (
	ModeTypeMask = ns.ModeTypeMask
	ModeDir      = ns.ModeDir
	ModeRegular  = ns.ModeRegular
	ModeSymlink  = ns.ModeSymlink
	ModeFIFO     = ns.ModeFIFO
	ModeSocket   = ns.ModeSocket
	ModeCharDev  = ns.ModeCharDev
	ModeBlockDev = ns.ModeBlockDev
	ModePerm     = ns.ModePerm // permission, setuid, setgid and sticky bits
	ModeSetgid   = ns.ModeSetgid
)

// TypeMode returns the st_mode type bits of t (ns.TypeMode).
func TypeMode(t snapshot.EntryType) uint32 { return ns.TypeMode(t) }

// TypeOfMode returns the entry type of st_mode bits, or false for an
// unknown type (ns.TypeOfMode).
func TypeOfMode(mode uint32) (snapshot.EntryType, bool) { return ns.TypeOfMode(mode) }

// Attr is what stat(2) reports for an inode (see ns.Attr, ns.AttrOf).
type Attr = ns.Attr

// Time converts a nanosecond timestamp to time.Time.
func Time(ns int64) time.Time { return time.Unix(0, ns) }

// Cred is the caller's identity, used for the owner of new inodes.
type Cred = ns.Cred

// SetAttrIn lists the attributes SetAttr changes; nil fields are left
// alone (see ns.SetAttrIn).
type SetAttrIn = ns.SetAttrIn

// DirEntry is one entry of a directory listing.
type DirEntry = ns.DirEntry

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
