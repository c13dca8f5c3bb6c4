package fs

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/agentfs/agentfs/cache"
)

// Atime says when reading a file or listing a directory updates its access
// time, as the mount options of the same names do on ext4.
type Atime int

const (
	// NoAtime never updates access times (the default: see the package
	// doc for what the other modes cost).
	NoAtime Atime = iota
	// RelAtime updates the access time of a file or directory opened for
	// reading when it is not later than its modification or change time,
	// or is a day old (Linux's default for local filesystems).
	RelAtime
	// StrictAtime updates the access time at every open for reading.
	StrictAtime
)

var atimeNames = [...]string{NoAtime: "noatime", RelAtime: "relatime", StrictAtime: "strictatime"}

// String returns the mount option of a: "noatime", "relatime" or
// "strictatime".
func (a Atime) String() string {
	if a < 0 || int(a) >= len(atimeNames) {
		return fmt.Sprintf("Atime(%d)", int(a))
	}
	return atimeNames[a]
}

// ParseAtime parses a mount option name as String returns it; anything
// else is an error naming the choices.
func ParseAtime(s string) (Atime, error) {
	for a, name := range atimeNames {
		if s == name {
			return Atime(a), nil
		}
	}
	return NoAtime, fmt.Errorf("atime mode %q: want noatime, relatime or strictatime: %w", s, cache.ErrInvalid)
}

// relatimeAge is how old an access time may grow under relatime before a
// read updates it anyway.
const relatimeAge = 24 * time.Hour

// touchAtime updates n's access time for an open with flags (open(2)
// flags), as the mount's atime mode asks: never for NoAtime, a read-only
// mount, O_NOATIME or a write-only open. FUSE inodes are S_NOATIME (the
// kernel leaves atime to the server) and reads served from the kernel's
// page cache never reach the server, so the access is counted at open,
// not at each read(2). The access time changes without the change time,
// and the kernel is told to drop the attributes it caches (an
// attribute-only invalidation takes no lock a request holds, so it is safe
// here, unlike the Server's Invalidate methods).
func (n *node) touchAtime(ctx context.Context, flags uint32) syscall.Errno {
	fsys := n.fsys
	if fsys.atime == NoAtime || fsys.readOnly || flags&syscall.O_NOATIME != 0 || flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return 0
	}
	a, err := fsys.vol.GetAttr(ctx, n.ino())
	if err != nil {
		return n.errno("atime", err)
	}
	now := time.Now().UnixNano()
	if fsys.atime == RelAtime && a.Atime > a.Mtime && a.Atime > a.Ctime && now-a.Atime < int64(relatimeAge) {
		return 0
	}
	if _, err := fsys.vol.SetAttr(ctx, n.ino(), cache.SetAttrIn{Atime: &now, Ctime: &a.Ctime}); err != nil {
		return n.errno("atime", err)
	}
	if srv := fsys.server.Load(); srv != nil {
		srv.InodeNotify(n.ino(), -1, 0)
	}
	return 0
}
