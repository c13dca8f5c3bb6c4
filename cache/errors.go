package cache

import "errors"

// Error kinds returned by Volume methods; check them with errors.Is. fs/
// maps each to one errno.
var (
	ErrNotFound     = errors.New("no such file or directory")
	ErrExists       = errors.New("file exists")
	ErrNotEmpty     = errors.New("directory not empty")
	ErrNotDir       = errors.New("not a directory")
	ErrIsDir        = errors.New("is a directory")
	ErrInvalid      = errors.New("invalid argument")
	ErrNameTooLong  = errors.New("file name too long")
	ErrReadOnly     = errors.New("read-only volume")
	ErrNoAttr       = errors.New("no such attribute")
	ErrRange        = errors.New("result too large for buffer")
	ErrNotSupported = errors.New("operation not supported")
	ErrPermission   = errors.New("operation not permitted")
	ErrFileTooBig   = errors.New("file too large")
	ErrLoop         = errors.New("too many levels of symbolic links")
	ErrNoSpace      = errors.New("no space left on device")
	// ErrIO: data could not be read or verified (a chunk missing from the
	// store, or whose bytes do not match their hash). Never wrong data.
	ErrIO = errors.New("input/output error")
	// ErrClosed: the volume has been closed.
	ErrClosed = errors.New("volume is closed")
)
