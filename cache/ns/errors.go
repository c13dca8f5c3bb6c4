package ns

import "errors"

// Error kinds of namespace changes; check them with errors.Is. Package
// cache returns them under the same names (cache.ErrNotFound is
// ErrNotFound), and fs/ maps each to one errno.
var (
	ErrNotFound     = errors.New("no such file or directory")
	ErrExists       = errors.New("file exists")
	ErrNotEmpty     = errors.New("directory not empty")
	ErrNotDir       = errors.New("not a directory")
	ErrIsDir        = errors.New("is a directory")
	ErrInvalid      = errors.New("invalid argument")
	ErrNameTooLong  = errors.New("file name too long")
	ErrNoAttr       = errors.New("no such attribute")
	ErrRange        = errors.New("result too large for buffer")
	ErrNotSupported = errors.New("operation not supported")
	ErrPermission   = errors.New("operation not permitted")
	ErrNoSpace      = errors.New("no space left on device")
	// ErrIO: a record could not be read or decoded. Never wrong data.
	ErrIO = errors.New("input/output error")
)
