package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/cache"
)

// errnoTable maps the engine's error kinds to errno values. The first
// matching row wins, so more specific kinds come first. Context errors come
// before everything else: an interrupted caller gets EINTR whatever the
// engine was doing when it noticed.
var errnoTable = []struct {
	kind  error
	errno syscall.Errno
}{
	{context.Canceled, syscall.EINTR},
	{context.DeadlineExceeded, syscall.EINTR},
	{cache.ErrNotFound, syscall.ENOENT},
	{cache.ErrExists, syscall.EEXIST},
	{cache.ErrNotEmpty, syscall.ENOTEMPTY},
	{cache.ErrNotDir, syscall.ENOTDIR},
	{cache.ErrIsDir, syscall.EISDIR},
	{cache.ErrInvalid, syscall.EINVAL},
	{cache.ErrNameTooLong, syscall.ENAMETOOLONG},
	{cache.ErrReadOnly, syscall.EROFS},
	{cache.ErrNoAttr, syscall.ENODATA},
	{cache.ErrRange, syscall.ERANGE},
	{cache.ErrNotSupported, syscall.EOPNOTSUPP},
	{cache.ErrPermission, syscall.EPERM},
	{cache.ErrFileTooBig, syscall.EFBIG},
	{cache.ErrLoop, syscall.ELOOP},
	{cache.ErrNoSpace, syscall.ENOSPC},
	{cache.ErrClosed, syscall.ENOTCONN},
	// ErrIO is a known kind but always worth a log line: data could not be
	// read or verified. It is handled by Errno below.
}

// passErrnos are errno values from the local disk (the cache directory)
// that reach the caller unchanged: the disk is full, over quota, or the
// cache directory's filesystem refuses the size. Any other raw errno is an
// engine failure and becomes EIO.
var passErrnos = map[syscall.Errno]bool{
	syscall.ENOSPC: true,
	syscall.EDQUOT: true,
	syscall.EFBIG:  true,
	syscall.EINTR:  true,
}

// Errno returns the errno that a FUSE operation reports for err, the error
// an engine (cache.Volume) method returned. It is the only place where
// engine errors become errno values but one: an inode the kernel still
// knows and the engine no longer has is ESTALE, not ENOENT, where the
// kernel gives only an inode number (an open, export.go's LookupNode),
// so that a path open looks its name up again and a file handle is
// stale. The few checks fs/ makes itself before
// calling the engine (a write to a read-only mount, an unsupported fallocate
// mode or rename flag, a negative offset) answer their errno directly in
// node.go. nil is 0; a cancelled or expired context is
// EINTR; each cache error kind has one errno (see the table in errno.go);
// ENOSPC, EDQUOT, EFBIG and EINTR from the local disk pass through; cache.ErrIO
// and everything else is EIO. known is false for an error that matched no
// kind (the caller logs those), and true otherwise, including ErrIO.
func Errno(err error) (errno syscall.Errno, known bool) {
	if err == nil {
		return 0, true
	}
	for _, row := range errnoTable {
		if errors.Is(err, row.kind) {
			return row.errno, true
		}
	}
	if errors.Is(err, cache.ErrIO) {
		return syscall.EIO, true
	}
	var e syscall.Errno
	if errors.As(err, &e) && passErrnos[e] {
		return e, true
	}
	return syscall.EIO, false
}

// toErrno converts the result of engine operation op on inode ino for the
// kernel, logging what the caller cannot see: one line for an unknown error
// and for ErrIO (data that could not be read or verified).
func (fsys *filesystem) toErrno(op string, ino uint64, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	errno, known := Errno(err)
	switch {
	case !known:
		fsys.log.Error("fuse: unexpected engine error, reporting EIO", "op", op, "ino", ino, "err", err)
	case errors.Is(err, cache.ErrIO):
		fsys.log.Warn("fuse: I/O error", "op", op, "ino", ino, "err", err)
	}
	return errno
}

// panicHandler is go-fuse's MountOptions.PanicHandler: the edge where a
// panic in any FUSE handler is recovered. It logs the panic with its stack
// once and answers EIO; the mount keeps serving.
func panicHandler(log *slog.Logger) func(any) fuse.Status {
	return func(v any) fuse.Status {
		buf := make([]byte, 64<<10)
		buf = buf[:runtime.Stack(buf, false)]
		log.Error("fuse: panic in a FUSE handler, reporting EIO", "panic", fmt.Sprint(v), "stack", string(buf))
		return fuse.EIO
	}
}
