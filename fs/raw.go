package fs

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/cache"
)

// rawFS wraps go-fuse's node bridge for the one thing its node API drops:
// the flags of a WRITE request. With FUSE_HANDLE_KILLPRIV_V2 negotiated,
// the kernel no longer asks for security.capability before every write(2)
// (a round trip each); instead it flags the writes of unprivileged callers
// with FUSE_WRITE_KILL_SUIDGID, and the server must drop the file's
// set-user-ID and set-group-ID bits and its capabilities, as ext4 does.
type rawFS struct {
	fuse.RawFileSystem
	fsys *filesystem
}

// Write serves a WRITE, then drops privileges (afterWrite).
func (r *rawFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	n, st := r.RawFileSystem.Write(cancel, in, data)
	if st.Ok() {
		st = r.afterWrite(in)
	}
	return n, st
}

// Writev serves a WRITE split over buffers, then drops privileges
// (afterWrite).
func (r *rawFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	n, st := r.RawFileSystem.Writev(cancel, in, data)
	if st.Ok() {
		st = r.afterWrite(in)
	}
	return n, st
}

// afterWrite applies FUSE_WRITE_KILL_SUIDGID (a caller without
// CAP_FSETID: the set-user-ID bits and the capabilities go). For a write
// through an FOPEN_DIRECT_IO handle (every handle on a mount with
// Tuning.DirectWrite, a passthrough writer on any mount) it also drops the
// capabilities after every other write: the kernel skips its own privilege
// check (file_remove_privs) for such a write and sets the flag only for
// unprivileged callers, so a write by root would otherwise keep a file's
// capabilities, which ext4 removes whoever writes. That costs a look-up of
// the attribute per such WRITE.
func (r *rawFS) afterWrite(in *fuse.WriteIn) fuse.Status {
	ctx := context.Background()
	switch {
	case in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0:
		return fuse.Status(r.fsys.killPriv(ctx, in.NodeId, &in.Caller))
	case r.fsys.directWr || r.fsys.passthroughOpen(in.NodeId):
		return fuse.Status(r.fsys.toErrno("kill-caps", in.NodeId, r.fsys.dropCaps(ctx, in.NodeId)))
	}
	return fuse.OK
}

// capabilityXattr holds file capabilities; a write or truncate by an
// unprivileged caller removes it.
const capabilityXattr = "security.capability"

// killPriv drops the set-user-ID and set-group-ID bits (see killedMode)
// and the file capabilities of inode ino, after a change of its data or
// owner by caller c, who lacks CAP_FSETID (the kernel says so with
// FUSE_WRITE_KILL_SUIDGID and FATTR_KILL_SUIDGID; for fallocate, which has
// no such flag, the server asks lacksFsetid).
func (fsys *filesystem) killPriv(ctx context.Context, ino uint64, c *fuse.Caller) syscall.Errno {
	a, err := fsys.vol.GetAttr(ctx, ino)
	if err == nil {
		if m, ok := killedMode(a, c); ok {
			_, err = fsys.vol.SetAttr(ctx, ino, cache.SetAttrIn{Mode: &m})
		}
	}
	if err == nil {
		err = fsys.dropCaps(ctx, ino)
	}
	return fsys.toErrno("kill-suid", ino, err)
}

// dropCaps removes ino's file capabilities, if any. It looks first, under
// a shared read: a file without them (nearly every file) costs no
// exclusive namespace change.
func (fsys *filesystem) dropCaps(ctx context.Context, ino uint64) error {
	_, err := fsys.vol.GetXattr(ctx, ino, capabilityXattr)
	if err == nil {
		err = fsys.vol.RemoveXattr(ctx, ino, capabilityXattr)
	}
	if errors.Is(err, cache.ErrNoAttr) {
		return nil
	}
	return err
}

// killedMode returns the mode of a without the bits a change by caller c,
// who lacks CAP_FSETID, clears, and whether that changes anything, as
// Linux (6.x) does on ext4: S_ISUID always; S_ISGID when the file is
// group-executable, or else (the bit then means mandatory locking) when c
// is neither in the file's group nor capable of CAP_FSETID in it (a chown
// by root clears the bits too, but keeps this one).
func killedMode(a cache.Attr, c *fuse.Caller) (uint32, bool) {
	m := a.Mode &^ 0o4000
	switch {
	case a.Mode&0o2010 == 0o2010:
		m &^= 0o2000
	case a.Mode&0o2000 != 0 && !inGroupOrCapable(c, a.Gid):
		m &^= 0o2000
	}
	return m, m != a.Mode
}

// capFsetid is CAP_FSETID's bit number in a capability set.
const capFsetid = 4

// lacksFsetid reports whether caller c lacks CAP_FSETID, read from its
// /proc/PID/status. A caller the server cannot see (another pid namespace)
// is taken as privileged if and only if it is root.
func lacksFsetid(c *fuse.Caller) bool {
	st := procStatus(c.Pid)
	if st == nil {
		return c.Uid != 0
	}
	return !hasCap(st["CapEff"], capFsetid)
}

// inGroupOrCapable reports whether caller c is in group gid (its fsgid or
// a supplementary group) or has CAP_FSETID, as the kernel's
// in_group_or_capable does; a caller the server cannot see only counts
// with its gid or as root.
func inGroupOrCapable(c *fuse.Caller, gid uint32) bool {
	if c.Gid == gid {
		return true
	}
	st := procStatus(c.Pid)
	if st == nil {
		return c.Uid == 0
	}
	for _, g := range strings.Fields(st["Groups"]) {
		if g == strconv.FormatUint(uint64(gid), 10) {
			return true
		}
	}
	return hasCap(st["CapEff"], capFsetid)
}

// procStatus returns the fields of /proc/PID/status by name, or nil if
// the process is not visible to the server.
func procStatus(pid uint32) map[string]string {
	if pid == 0 {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// hasCap reports whether the hexadecimal capability set set (as in
// /proc/PID/status) holds capability bit.
func hasCap(set string, bit uint) bool {
	v, err := strconv.ParseUint(set, 16, 64)
	return err == nil && v&(1<<bit) != 0
}
