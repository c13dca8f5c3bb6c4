package cache

import (
	"errors"

	"github.com/agentfs/agentfs/cache/ns"
)

// Error kinds returned by Volume methods; check them with errors.Is. fs/
// maps each to one errno. The namespace's kinds are cache/ns's, under the
// same names (the same values).
var (
	ErrNotFound     = ns.ErrNotFound
	ErrExists       = ns.ErrExists
	ErrNotEmpty     = ns.ErrNotEmpty
	ErrNotDir       = ns.ErrNotDir
	ErrIsDir        = ns.ErrIsDir
	ErrInvalid      = ns.ErrInvalid
	ErrNameTooLong  = ns.ErrNameTooLong
	ErrReadOnly     = errors.New("read-only volume")
	ErrNoAttr       = ns.ErrNoAttr
	ErrRange        = ns.ErrRange
	ErrNotSupported = ns.ErrNotSupported
	ErrPermission   = ns.ErrPermission
	ErrFileTooBig   = errors.New("file too large")
	ErrLoop         = errors.New("too many levels of symbolic links")
	ErrNoSpace      = ns.ErrNoSpace
	// ErrIO: data could not be read or verified (a chunk missing from the
	// store, or whose bytes do not match their hash). Never wrong data.
	ErrIO = ns.ErrIO
	// ErrClosed: the volume has been closed.
	ErrClosed = errors.New("volume is closed")
)
