package fs

import (
	"context"
	"errors"

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

// Write serves a WRITE, then applies FUSE_WRITE_KILL_SUIDGID.
func (r *rawFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	n, st := r.RawFileSystem.Write(cancel, in, data)
	if st.Ok() && in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		st = r.fsys.killPriv(in.NodeId)
	}
	return n, st
}

// Writev serves a WRITE split over buffers, then applies
// FUSE_WRITE_KILL_SUIDGID.
func (r *rawFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	n, st := r.RawFileSystem.Writev(cancel, in, data)
	if st.Ok() && in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		st = r.fsys.killPriv(in.NodeId)
	}
	return n, st
}

// capabilityXattr holds file capabilities; a write or truncate by an
// unprivileged caller removes it.
const capabilityXattr = "security.capability"

// killPriv drops the set-user-ID bit, the set-group-ID bit of a
// group-executable file, and the file capabilities of inode ino, after a
// change by a caller without CAP_FSETID.
func (fsys *filesystem) killPriv(ino uint64) fuse.Status {
	ctx := context.Background()
	a, err := fsys.vol.GetAttr(ctx, ino)
	if err == nil {
		if m, ok := killedMode(a.Mode); ok {
			_, err = fsys.vol.SetAttr(ctx, ino, cache.SetAttrIn{Mode: &m})
		}
	}
	if err == nil {
		err = fsys.dropCaps(ctx, ino)
	}
	return fuse.Status(fsys.toErrno("kill-suid", ino, err))
}

// dropCaps removes ino's file capabilities, if any.
func (fsys *filesystem) dropCaps(ctx context.Context, ino uint64) error {
	err := fsys.vol.RemoveXattr(ctx, ino, capabilityXattr)
	if errors.Is(err, cache.ErrNoAttr) {
		return nil
	}
	return err
}

// killedMode returns mode without the bits a write by an unprivileged
// caller clears, and whether that changes anything: S_ISUID always, S_ISGID
// only with S_IXGRP (without it the bit means mandatory locking).
func killedMode(mode uint32) (uint32, bool) {
	m := mode &^ 0o4000
	if mode&0o2010 == 0o2010 {
		m &^= 0o2000
	}
	return m, m != mode
}
