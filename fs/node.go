package fs

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/fs/changefeed"
	"github.com/agentfs/agentfs/snapshot"
)

// node is every inode of the mount: directories, regular files, symlinks
// and special files alike. It holds no state of its own beyond the engine's
// inode number (its StableAttr().Ino, which is also the FUSE node ID): the
// engine owns the behaviour, node translates arguments and errors. Methods
// are called by go-fuse from its request goroutines, concurrently; the
// engine's locks make that safe.
type node struct {
	gofs.Inode
	fsys *filesystem
}

var (
	_ gofs.InodeEmbedder = (*node)(nil)

	_ gofs.NodeLookuper       = (*node)(nil)
	_ gofs.NodeGetattrer      = (*node)(nil)
	_ gofs.NodeSetattrer      = (*node)(nil)
	_ gofs.NodeOpener         = (*node)(nil)
	_ gofs.NodeCreater        = (*node)(nil)
	_ gofs.NodeTmpfiler       = (*node)(nil)
	_ gofs.NodeReader         = (*node)(nil)
	_ gofs.NodeWriter         = (*node)(nil)
	_ gofs.NodeFlusher        = (*node)(nil)
	_ gofs.NodeFsyncer        = (*node)(nil)
	_ gofs.NodeReleaser       = (*node)(nil)
	_ gofs.NodeAllocater      = (*node)(nil)
	_ gofs.NodeCopyFileRanger = (*node)(nil)
	_ gofs.NodeMkdirer        = (*node)(nil)
	_ gofs.NodeMknoder        = (*node)(nil)
	_ gofs.NodeSymlinker      = (*node)(nil)
	_ gofs.NodeReadlinker     = (*node)(nil)
	_ gofs.NodeLinker         = (*node)(nil)
	_ gofs.NodeUnlinker       = (*node)(nil)
	_ gofs.NodeRmdirer        = (*node)(nil)
	_ gofs.NodeRenamer        = (*node)(nil)
	_ gofs.NodeOpendirHandler = (*node)(nil)
	_ gofs.NodeGetxattrer     = (*node)(nil)
	_ gofs.NodeSetxattrer     = (*node)(nil)
	_ gofs.NodeListxattrer    = (*node)(nil)
	_ gofs.NodeRemovexattrer  = (*node)(nil)
	_ gofs.NodeStatfser       = (*node)(nil)
)

// ino is the engine's inode number of n.
func (n *node) ino() uint64 { return n.StableAttr().Ino }

// errno converts the engine's answer to operation op on n.
func (n *node) errno(op string, err error) syscall.Errno {
	return n.fsys.toErrno(op, n.ino(), err)
}

// child returns the go-fuse inode for a, a child of n: go-fuse keeps one
// Inode per engine inode number (hard links share it), so an inode the
// kernel already knows is reused and the new node is dropped.
func (n *node) child(ctx context.Context, a *cache.Attr, out *fuse.EntryOut) *gofs.Inode {
	fillAttr(a, &out.Attr)
	ch := &node{fsys: n.fsys}
	return n.NewInode(ctx, ch, gofs.StableAttr{Mode: cache.TypeMode(a.Type), Ino: a.Ino, Gen: uint64(n.fsys.gen)})
}

// Lookup finds name in directory n.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.ops.done(opLookup, time.Now(), &errno)
	a, err := n.fsys.vol.Lookup(ctx, n.ino(), name)
	if err != nil {
		return nil, n.errno("lookup", err)
	}
	return n.child(ctx, &a, out), 0
}

// Getattr reports n's attributes. The kernel caches them for the mount's
// attribute timeout.
func (n *node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.ops.done(opGetattr, time.Now(), &errno)
	a, err := n.fsys.vol.GetAttr(ctx, n.ino())
	if errors.Is(err, cache.ErrNotFound) {
		if t, ok := n.fsys.tomb(n.ino()); ok {
			a, err = t, nil
		}
	}
	if err != nil {
		return n.errno("getattr", err)
	}
	fillAttr(&a, &out.Attr)
	return 0
}

// OnForget runs when the kernel (and go-fuse) no longer know n.
func (n *node) OnForget() { n.fsys.forget(n.ino()) }

// Setattr changes mode, owner, size and times (chmod, chown, truncate,
// utimensat). Permission checks are the kernel's (default_permissions).
func (n *node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) (errno syscall.Errno) {
	defer n.fsys.ops.done(opSetattr, time.Now(), &errno)
	s := setAttrIn(in)
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		// A truncate or chown by a caller without CAP_FSETID
		// (FUSE_HANDLE_KILLPRIV_V2): drop what a write would.
		if err := n.killPrivInto(ctx, &s); err != nil {
			return n.errno("setattr", err)
		}
	}
	a, err := n.fsys.vol.SetAttr(ctx, n.ino(), s)
	if err != nil {
		return n.errno("setattr", err)
	}
	n.recordModified()
	fillAttr(&a, &out.Attr)
	return 0
}

// killPrivInto adds to s the mode change that drops n's set-user-ID and
// set-group-ID bits (see killedMode) and removes n's file capabilities.
func (n *node) killPrivInto(ctx context.Context, s *cache.SetAttrIn) error {
	if n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return nil
	}
	a, err := n.fsys.vol.GetAttr(ctx, n.ino())
	if err != nil {
		return err
	}
	if s.Mode != nil {
		a.Mode = *s.Mode
	}
	if m, ok := killedMode(a, caller(ctx)); ok {
		s.Mode = &m
	}
	return n.fsys.dropCaps(ctx, n.ino())
}

// setAttrIn translates a FUSE SETATTR request for the engine.
func setAttrIn(in *fuse.SetAttrIn) cache.SetAttrIn {
	var s cache.SetAttrIn
	v := in.Valid
	if v&fuse.FATTR_MODE != 0 {
		m := in.Mode & cache.ModePerm
		s.Mode = &m
	}
	if v&fuse.FATTR_UID != 0 {
		u := in.Uid
		s.Uid = &u
	}
	if v&fuse.FATTR_GID != 0 {
		g := in.Gid
		s.Gid = &g
	}
	if v&fuse.FATTR_SIZE != 0 {
		sz := in.Size
		s.Size = &sz
	}
	switch {
	case v&fuse.FATTR_ATIME_NOW != 0:
		s.AtimeNow = true
	case v&fuse.FATTR_ATIME != 0:
		t := joinTime(in.Atime, in.Atimensec)
		s.Atime = &t
	}
	switch {
	case v&fuse.FATTR_MTIME_NOW != 0:
		s.MtimeNow = true
	case v&fuse.FATTR_MTIME != 0:
		t := joinTime(in.Mtime, in.Mtimensec)
		s.Mtime = &t
	}
	if v&fuse.FATTR_CTIME != 0 {
		t := joinTime(in.Ctime, in.Ctimensec)
		s.Ctime = &t
	}
	return s
}

// Open opens regular file n. O_TRUNC empties it (only sent by kernels that
// negotiated atomic O_TRUNC; otherwise the kernel truncates with SETATTR).
// The kernel applies O_APPEND itself: it computes the offset of every
// append from the size it caches, which is exact because every write goes
// through this mount.
func (n *node) Open(ctx context.Context, flags uint32) (_ gofs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.fsys.ops.done(opOpen, time.Now(), &errno)
	trunc := flags&syscall.O_TRUNC != 0
	if n.fsys.readOnly && (flags&syscall.O_ACCMODE != syscall.O_RDONLY || trunc) {
		return nil, 0, syscall.EROFS
	}
	if _, err := n.fsys.vol.Open(ctx, n.ino(), trunc); err != nil {
		if errors.Is(err, cache.ErrNotFound) {
			// The kernel still had the inode, the engine no longer does
			// (an unlinked file whose last release came meanwhile):
			// stale. A path open is retried by the kernel with a fresh
			// lookup, which says ENOENT; an open_by_handle_at is ESTALE
			// (fs/export.go).
			return nil, 0, syscall.ESTALE
		}
		return nil, 0, n.errno("open", err)
	}
	if errno := n.touchAtime(ctx, flags); errno != 0 {
		_ = n.fsys.vol.Release(context.WithoutCancel(ctx), n.ino())
		return nil, 0, errno
	}
	h := newHandle(n.ino(), flags)
	if trunc {
		wrote(h)
	}
	fh, out, errno := n.fsys.open(ctx, h, flags)
	if errno != 0 {
		_ = n.fsys.vol.Release(context.WithoutCancel(ctx), n.ino())
	}
	return fh, out, errno
}

// Create creates and opens regular file name in directory n, owned by the
// caller. O_EXCL fails with EEXIST if the name exists; without it an
// existing file is opened (and emptied with O_TRUNC).
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (_ *gofs.Inode, _ gofs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.fsys.ops.done(opCreate, time.Now(), &errno)
	excl := flags&syscall.O_EXCL != 0
	trunc := flags&syscall.O_TRUNC != 0
	existed := !excl && n.fsys.changes.Active() && n.GetChild(name) != nil
	a, err := n.fsys.vol.Create(ctx, n.ino(), name, mode&cache.ModePerm, callerCred(ctx), excl, trunc)
	if err != nil {
		return nil, nil, 0, n.errno("create", err)
	}
	h := newHandle(a.Ino, flags)
	fh, oflags, errno := n.fsys.open(ctx, h, flags)
	if errno != 0 {
		_ = n.fsys.vol.Release(context.WithoutCancel(ctx), a.Ino)
		return nil, nil, 0, errno
	}
	if !existed {
		n.recordChild(changefeed.OpCreated, name, changefeed.TypeFile)
	} else if trunc {
		wrote(h)
	}
	return n.child(ctx, &a, out), fh, oflags, 0
}

// Tmpfile creates and opens a regular file with no name for directory n
// (open(2) with O_TMPFILE), owned by the caller. It gets a name only if
// the caller links it into place (linkat of its descriptor); otherwise it
// is gone at its last close, or after a crash of the server
// (cache.Volume.CreateUnnamed).
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (_ *gofs.Inode, _ gofs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.fsys.ops.done(opCreate, time.Now(), &errno)
	a, err := n.fsys.vol.CreateUnnamed(ctx, n.ino(), mode&cache.ModePerm, callerCred(ctx))
	if err != nil {
		return nil, nil, 0, n.errno("tmpfile", err)
	}
	fh, oflags, errno := n.fsys.open(ctx, newHandle(a.Ino, flags), flags&^syscall.O_TRUNC)
	if errno != 0 {
		_ = n.fsys.vol.Release(context.WithoutCancel(ctx), a.Ino)
		return nil, nil, 0, errno
	}
	return n.child(ctx, &a, out), fh, oflags, 0
}

// Read reads from open file n.
func (n *node) Read(ctx context.Context, f gofs.FileHandle, dest []byte, off int64) (_ fuse.ReadResult, errno syscall.Errno) {
	defer n.fsys.ops.done(opRead, time.Now(), &errno)
	c, err := n.fsys.vol.Read(ctx, n.ino(), dest, uint64(off))
	if err != nil {
		return nil, n.errno("read", err)
	}
	n.fsys.ops.moved(opRead, c)
	return fuse.ReadResultData(dest[:c]), 0
}

// Write writes to open file n at off (the kernel has already resolved
// O_APPEND to an offset). It returns when the bytes are in the engine's
// local data file.
func (n *node) Write(ctx context.Context, f gofs.FileHandle, data []byte, off int64) (_ uint32, errno syscall.Errno) {
	defer n.fsys.ops.done(opWrite, time.Now(), &errno)
	if off < 0 {
		return 0, syscall.EINVAL
	}
	c, err := n.fsys.vol.Write(ctx, n.ino(), data, uint64(off))
	if err != nil {
		return 0, n.errno("write", err)
	}
	wrote(f)
	n.fsys.ops.moved(opWrite, c)
	return uint32(c), 0
}

// Flush runs at every close(2) of a descriptor of n opened without
// FOPEN_NOFLUSH (noFlushAt): the engine persists the file's in-memory
// attributes, and the change feed reports what the descriptor wrote.
func (n *node) Flush(ctx context.Context, f gofs.FileHandle) (errno syscall.Errno) {
	defer n.fsys.ops.done(opFlush, time.Now(), &errno)
	if n.fsys.noFlush {
		// The kernel takes ENOSYS as "never send FLUSH again" and
		// returns 0 from this close; the last release persists the
		// file and reports it modified.
		return syscall.ENOSYS
	}
	n.flushed(f)
	return n.errno("flush", n.fsys.vol.Flush(ctx, n.ino()))
}

// Fsync makes n's data and metadata survive a crash of the mount server
// (fsync, fdatasync, and fsync of a directory).
func (n *node) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) (errno syscall.Errno) {
	defer n.fsys.ops.done(opFsync, time.Now(), &errno)
	if err := n.fsys.adoptWritten(ctx, f); err != nil {
		return n.errno("fsync", err)
	}
	return n.errno("fsync", n.fsys.vol.Fsync(ctx, n.ino(), flags&1 != 0))
}

// Release ends one Open or Create of n; every handle is released exactly
// once (the kernel ignores errors here).
func (n *node) Release(ctx context.Context, f gofs.FileHandle) (errno syscall.Errno) {
	defer n.fsys.ops.done(opRelease, time.Now(), &errno)
	h := asHandle(f)
	if h == nil || !h.release() {
		return 0
	}
	// The kernel does not wait for RELEASE to finish; a cancelled context
	// must not leave the engine's open count behind.
	ctx = context.WithoutCancel(ctx)
	var err error
	if h.written.Load() {
		// Written since its last FLUSH (a writer sends none while the
		// change feed is inactive): persist now, as FLUSH would have,
		// even if other opens of the file keep it open.
		err = n.fsys.vol.Flush(ctx, h.ino)
	}
	n.flushed(h)
	err = errors.Join(err, n.fsys.release(ctx, f))
	return n.errno("release", errors.Join(err, n.fsys.vol.Release(ctx, h.ino)))
}

// Allocate implements fallocate(2): mode 0 extends the file (the new range
// reads as zeros), FALLOC_FL_KEEP_SIZE alone reserves nothing (blob storage
// has no fixed size), FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE and
// FALLOC_FL_ZERO_RANGE zero the range. Other modes are EOPNOTSUPP. Like a
// write, it drops the file's set-user-ID and set-group-ID bits when the
// caller lacks CAP_FSETID (killPriv).
func (n *node) Allocate(ctx context.Context, f gofs.FileHandle, off uint64, size uint64, mode uint32) (errno syscall.Errno) {
	defer n.fsys.ops.done(opFallocate, time.Now(), &errno)
	if size == 0 {
		return syscall.EINVAL
	}
	end := off + size
	if end < off || end > cache.MaxFileSize {
		return syscall.EFBIG
	}
	a, err := n.fsys.vol.GetAttr(ctx, n.ino())
	if err != nil {
		return n.errno("fallocate", err)
	}
	if a.Type != snapshot.TypeFile {
		return syscall.ENODEV
	}
	if errno := n.fits(ctx, a.Size, off, end, mode); errno != 0 {
		return errno
	}
	if errno := n.allocate(ctx, a.Size, off, end, mode); errno != 0 {
		return errno
	}
	wrote(f)
	// Every mode changes the file, as far as the set-user-ID rules go
	// (ext4 drops the bits for each), and FALLOCATE carries no
	// FUSE_WRITE_KILL_SUIDGID: the server asks about the caller itself.
	if c := caller(ctx); lacksFsetid(c) {
		return n.fsys.killPriv(ctx, n.ino(), c)
	}
	return 0
}

// fits answers ENOSPC when fallocate mode of [off, end) in a file of size
// size asks for more space past the end of the file than the volume has
// free (cache.Volume.FreeBytes), as ext4 does; a request that fits passes
// (the engine reserves nothing: the file grows sparse). Holes inside the
// file are not counted.
func (n *node) fits(ctx context.Context, size, off, end uint64, mode uint32) syscall.Errno {
	start := max(off, size)
	if mode&unix.FALLOC_FL_PUNCH_HOLE != 0 || end <= start {
		return 0
	}
	free, err := n.fsys.vol.FreeBytes(ctx)
	if err != nil {
		return n.errno("fallocate", err)
	}
	if end-start > free {
		return syscall.ENOSPC
	}
	return 0
}

// allocate does the work of Allocate for a file of size size.
func (n *node) allocate(ctx context.Context, size, off, end uint64, mode uint32) syscall.Errno {
	const (
		keepSize  = unix.FALLOC_FL_KEEP_SIZE
		punchHole = unix.FALLOC_FL_PUNCH_HOLE
		zeroRange = unix.FALLOC_FL_ZERO_RANGE
	)
	switch mode {
	case 0:
		return n.extend(ctx, size, end)
	case keepSize:
		return 0
	case punchHole | keepSize:
		return n.zero(ctx, off, min(end, size))
	case zeroRange, zeroRange | keepSize:
		if errno := n.zero(ctx, off, min(end, size)); errno != 0 {
			return errno
		}
		if mode&keepSize == 0 {
			return n.extend(ctx, size, end)
		}
		return 0
	case punchHole:
		return syscall.EINVAL
	}
	return syscall.EOPNOTSUPP
}

// extend grows a file of size size to end (no-op if it is not smaller).
func (n *node) extend(ctx context.Context, size, end uint64) syscall.Errno {
	if end <= size {
		return 0
	}
	_, err := n.fsys.vol.SetAttr(ctx, n.ino(), cache.SetAttrIn{Size: &end})
	return n.errno("fallocate", err)
}

// zero writes zeros over [off, end) of open file n.
func (n *node) zero(ctx context.Context, off, end uint64) syscall.Errno {
	if off >= end {
		return 0
	}
	buf := make([]byte, min(end-off, 1<<20))
	for off < end {
		c := min(uint64(len(buf)), end-off)
		if _, err := n.fsys.vol.Write(ctx, n.ino(), buf[:c], off); err != nil {
			return n.errno("fallocate", err)
		}
		off += c
	}
	return 0
}

// CopyFileRange copies len bytes from n at offIn to out at offOut, inside
// the server (copy_file_range(2) between two files of this mount). It
// returns the bytes copied, fewer at the end of the source.
func (n *node) CopyFileRange(ctx context.Context, fhIn gofs.FileHandle, offIn uint64, out *gofs.Inode, fhOut gofs.FileHandle, offOut uint64, length uint64, flags uint64) (_ uint32, errno syscall.Errno) {
	defer n.fsys.ops.done(opCopyFileRange, time.Now(), &errno)
	if flags != 0 {
		return 0, syscall.EINVAL
	}
	length = min(length, 1<<30)
	dst := out.StableAttr().Ino
	wrote(fhOut)
	buf := make([]byte, min(length, 1<<20))
	var done uint64
	for done < length {
		want := min(uint64(len(buf)), length-done)
		c, err := n.fsys.vol.Read(ctx, n.ino(), buf[:want], offIn+done)
		if err != nil {
			return uint32(done), n.errno("copy_file_range", err)
		}
		if c == 0 {
			break
		}
		if _, err := n.fsys.vol.Write(ctx, dst, buf[:c], offOut+done); err != nil {
			return uint32(done), n.fsys.toErrno("copy_file_range", dst, err)
		}
		done += uint64(c)
	}
	return uint32(done), 0
}

// Mkdir creates directory name in n, owned by the caller.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.ops.done(opMkdir, time.Now(), &errno)
	a, err := n.fsys.vol.Mkdir(ctx, n.ino(), name, mode&cache.ModePerm, callerCred(ctx))
	if err != nil {
		return nil, n.errno("mkdir", err)
	}
	n.recordChild(changefeed.OpCreated, name, changefeed.TypeDir)
	return n.child(ctx, &a, out), 0
}

// Mknod creates a FIFO, socket or device node name in n, owned by the
// caller.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.ops.done(opMknod, time.Now(), &errno)
	a, err := n.fsys.vol.Mknod(ctx, n.ino(), name, mode, uint64(dev), callerCred(ctx))
	if err != nil {
		return nil, n.errno("mknod", err)
	}
	n.recordChild(changefeed.OpCreated, name, typeOfMode(mode))
	return n.child(ctx, &a, out), 0
}

// Symlink creates symlink name in n pointing to target, owned by the
// caller.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.ops.done(opSymlink, time.Now(), &errno)
	a, err := n.fsys.vol.Symlink(ctx, n.ino(), name, target, callerCred(ctx))
	if err != nil {
		return nil, n.errno("symlink", err)
	}
	n.recordChild(changefeed.OpCreated, name, changefeed.TypeSymlink)
	return n.child(ctx, &a, out), 0
}

// Readlink returns symlink n's target. The kernel caches it (symlinks never
// change in place).
func (n *node) Readlink(ctx context.Context) (_ []byte, errno syscall.Errno) {
	defer n.fsys.ops.done(opReadlink, time.Now(), &errno)
	t, err := n.fsys.vol.Readlink(ctx, n.ino())
	if err != nil {
		return nil, n.errno("readlink", err)
	}
	return []byte(t), 0
}

// Link creates name in n as a new name of target.
func (n *node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.ops.done(opLink, time.Now(), &errno)
	a, err := n.fsys.vol.Link(ctx, target.EmbeddedInode().StableAttr().Ino, n.ino(), name)
	if err != nil {
		return nil, n.errno("link", err)
	}
	n.recordChild(changefeed.OpCreated, name, typeOfMode(cache.TypeMode(a.Type)))
	return n.child(ctx, &a, out), 0
}

// Unlink removes the non-directory name from n.
func (n *node) Unlink(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.fsys.ops.done(opUnlink, time.Now(), &errno)
	typ := changefeed.TypeFile
	if n.fsys.changes.Active() {
		typ = n.childType(name)
	}
	if err := n.fsys.vol.Unlink(ctx, n.ino(), name); err != nil {
		return n.errno("unlink", err)
	}
	n.recordChild(changefeed.OpDeleted, name, typ)
	return 0
}

// Rmdir removes the empty directory name from n.
func (n *node) Rmdir(ctx context.Context, name string) (errno syscall.Errno) {
	defer n.fsys.ops.done(opRmdir, time.Now(), &errno)
	dead := n.knownChildAttr(ctx, name)
	if err := n.fsys.vol.Rmdir(ctx, n.ino(), name); err != nil {
		return n.errno("rmdir", err)
	}
	n.recordChild(changefeed.OpDeleted, name, changefeed.TypeDir)
	if dead != nil {
		n.fsys.bury(*dead)
	}
	return 0
}

// knownChildAttr returns the attributes of directory name in n if the
// kernel knows it (it may outlive its removal), and nil otherwise.
func (n *node) knownChildAttr(ctx context.Context, name string) *cache.Attr {
	ch := n.GetChild(name)
	if ch == nil || ch.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil
	}
	a, err := n.fsys.vol.GetAttr(ctx, ch.StableAttr().Ino)
	if err != nil {
		return nil
	}
	return &a
}

// Rename implements rename(2) and renameat2(2) with RENAME_NOREPLACE and
// RENAME_EXCHANGE; RENAME_WHITEOUT is EINVAL.
func (n *node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) (errno syscall.Errno) {
	defer n.fsys.ops.done(opRename, time.Now(), &errno)
	const (
		noReplace = 1 // RENAME_NOREPLACE
		exchange  = 2 // RENAME_EXCHANGE
	)
	var rf cache.RenameFlags
	if flags&noReplace != 0 {
		rf |= cache.RenameNoReplace
	}
	if flags&exchange != 0 {
		rf |= cache.RenameExchange
	}
	if flags&^(noReplace|exchange) != 0 {
		return syscall.EINVAL
	}
	np := newParent.EmbeddedInode()
	var dead *cache.Attr
	if rf&cache.RenameExchange == 0 {
		if p, ok := np.Operations().(*node); ok {
			dead = p.knownChildAttr(ctx, newName) // a directory renamed over
		}
	}
	if err := n.fsys.vol.Rename(ctx, n.ino(), name, np.StableAttr().Ino, newName, rf); err != nil {
		return n.errno("rename", err)
	}
	n.recordRename(name, np, newName, rf&cache.RenameExchange != 0)
	if dead != nil {
		if _, err := n.fsys.vol.GetAttr(ctx, dead.Ino); errors.Is(err, cache.ErrNotFound) {
			n.fsys.bury(*dead)
		}
	}
	return 0
}

// OpendirHandle opens directory n for listing: the listing is a snapshot
// taken at the first read (and again after a rewind). The kernel sends
// OPENDIR for directories only, so nothing is asked of the engine here.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (_ gofs.FileHandle, _ uint32, errno syscall.Errno) {
	defer n.fsys.ops.done(opOpendir, time.Now(), &errno)
	if n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, 0, syscall.ENOTDIR
	}
	if errno := n.touchAtime(ctx, flags); errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{n: n}, n.fsys.dirOpenFlags(), 0
}

// Getxattr reads extended attribute attr of n into dest. A zero-length
// dest asks for the size; a dest too small for the value is ERANGE with
// the size. Attributes the mount does not support (xattrSupported) are
// EOPNOTSUPP.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (_ uint32, errno syscall.Errno) {
	defer n.fsys.ops.done(opGetxattr, time.Now(), &errno)
	if !n.fsys.xattrSupported(attr) {
		return 0, syscall.EOPNOTSUPP
	}
	v, err := n.fsys.vol.GetXattr(ctx, n.ino(), attr)
	if err != nil {
		return 0, n.errno("getxattr", err)
	}
	return copySized(dest, v)
}

// Listxattr writes the NUL-terminated attribute names of n into dest, with
// the same size-query and ERANGE rules as Getxattr. Names the mount does not
// support (xattrSupported; stored by an earlier version or another mount)
// are left out, as getxattr would fail on them.
func (n *node) Listxattr(ctx context.Context, dest []byte) (_ uint32, errno syscall.Errno) {
	defer n.fsys.ops.done(opListxattr, time.Now(), &errno)
	names, err := n.fsys.vol.ListXattr(ctx, n.ino())
	if err != nil {
		return 0, n.errno("listxattr", err)
	}
	var b []byte
	for _, name := range names {
		if n.fsys.xattrSupported(name) {
			b = append(append(b, name...), 0)
		}
	}
	return copySized(dest, b)
}

// knownXattrNamespace reports whether name lies in one of the attribute
// namespaces Linux defines (user., trusted., security., system.); ext4
// answers EOPNOTSUPP for any other, and so does the mount. (The kernel
// passes every name to a FUSE server; it checks the namespaces' permission
// rules itself.)
func knownXattrNamespace(name string) bool {
	for _, p := range []string{"user.", "trusted.", "security.", "system."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Attributes a mount answers EOPNOTSUPP for, as a filesystem without them
// does (see the package doc, "Extended attributes").
const (
	selinuxXattr    = "security.selinux"
	aclAccessXattr  = "system.posix_acl_access"
	aclDefaultXattr = "system.posix_acl_default"
)

// xattrSupported reports whether the mount serves extended attribute name:
// a name in a namespace Linux defines (knownXattrNamespace), except the
// SELinux label (there is none to give: on a machine running SELinux the
// kernel answers for it without asking the server) and, unless the mount
// enforces POSIX ACLs (Tuning.PosixACL), the ACL attributes. "Not supported"
// is the one answer tools remember per filesystem: ls -l then stops asking
// for both at every file.
func (fsys *filesystem) xattrSupported(name string) bool {
	switch name {
	case selinuxXattr:
		return false
	case aclAccessXattr, aclDefaultXattr:
		return fsys.posixACL
	}
	return knownXattrNamespace(name)
}

// copySized answers a getxattr/listxattr-style request.
func copySized(dest, v []byte) (uint32, syscall.Errno) {
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Setxattr sets extended attribute attr of n (flags XATTR_CREATE,
// XATTR_REPLACE).
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) (errno syscall.Errno) {
	defer n.fsys.ops.done(opSetxattr, time.Now(), &errno)
	if !n.fsys.xattrSupported(attr) {
		return syscall.EOPNOTSUPP
	}
	if err := n.fsys.vol.SetXattr(ctx, n.ino(), attr, data, flags); err != nil {
		return n.errno("setxattr", err)
	}
	n.recordModified()
	return 0
}

// Removexattr removes extended attribute attr of n.
func (n *node) Removexattr(ctx context.Context, attr string) (errno syscall.Errno) {
	defer n.fsys.ops.done(opRemovexattr, time.Now(), &errno)
	if !n.fsys.xattrSupported(attr) {
		return syscall.EOPNOTSUPP
	}
	if err := n.fsys.vol.RemoveXattr(ctx, n.ino(), attr); err != nil {
		return n.errno("removexattr", err)
	}
	n.recordModified()
	return 0
}

// Statfs reports the volume's capacity and use.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) (errno syscall.Errno) {
	defer n.fsys.ops.done(opStatfs, time.Now(), &errno)
	s, err := n.fsys.vol.StatFs(ctx)
	if err != nil {
		return n.errno("statfs", err)
	}
	out.Bsize = s.Bsize
	out.Frsize = s.Bsize
	out.Blocks = s.Blocks
	out.Bfree = s.Bfree
	out.Bavail = s.Bavail
	out.Files = s.Files
	out.Ffree = s.Ffree
	out.NameLen = s.NameLen
	return 0
}

// caller is the process a request comes from (the zero Caller if
// unknown).
func caller(ctx context.Context) *fuse.Caller {
	if c, ok := fuse.FromContext(ctx); ok {
		return c
	}
	return &fuse.Caller{}
}

// callerCred is the identity of the process a request comes from: the owner
// of the inodes it creates.
func callerCred(ctx context.Context) cache.Cred {
	if c, ok := fuse.FromContext(ctx); ok {
		return cache.Cred{Uid: c.Uid, Gid: c.Gid}
	}
	return cache.Cred{}
}

// fillAttr copies engine attributes into a FUSE attribute reply.
func fillAttr(a *cache.Attr, out *fuse.Attr) {
	out.Ino = a.Ino
	out.Size = a.Size
	out.Blocks = a.Blocks
	out.Blksize = 4096 // also keeps go-fuse from recomputing Blocks
	out.Atime, out.Atimensec = splitTime(a.Atime)
	out.Mtime, out.Mtimensec = splitTime(a.Mtime)
	out.Ctime, out.Ctimensec = splitTime(a.Ctime)
	out.Mode = a.StMode()
	out.Nlink = a.Nlink
	out.Uid = a.Uid
	out.Gid = a.Gid
	out.Rdev = uint32(a.Rdev)
}

// splitTime splits nanoseconds since the epoch into the seconds and
// nanoseconds of a FUSE time; times before 1970 have negative seconds (as
// two's complement, as the kernel reads them) and non-negative nanoseconds.
func splitTime(ns int64) (uint64, uint32) {
	sec, nsec := ns/1e9, ns%1e9
	if nsec < 0 {
		sec--
		nsec += 1e9
	}
	return uint64(sec), uint32(nsec)
}

// joinTime is the inverse of splitTime.
func joinTime(sec uint64, nsec uint32) int64 {
	return int64(sec)*1e9 + int64(nsec)
}
