package fs

import (
	"sync/atomic"
	"syscall"
	"time"
)

// op names one kind of FUSE request the mount serves.
type op int

const (
	opLookup op = iota
	opGetattr
	opSetattr
	opOpen
	opCreate
	opRead
	opWrite
	opFlush
	opFsync
	opRelease
	opFallocate
	opCopyFileRange
	opMkdir
	opMknod
	opSymlink
	opReadlink
	opLink
	opUnlink
	opRmdir
	opRename
	opOpendir
	opReaddir
	opGetxattr
	opSetxattr
	opListxattr
	opRemovexattr
	opStatfs
	numOps
)

var opNames = [numOps]string{"lookup", "getattr", "setattr", "open", "create", "read", "write", "flush", "fsync",
	"release", "fallocate", "copy_file_range", "mkdir", "mknod", "symlink", "readlink", "link", "unlink", "rmdir",
	"rename", "opendir", "readdir", "getxattr", "setxattr", "listxattr", "removexattr", "statfs"}

// opCounters count the requests of one mount, by op. Safe for concurrent
// use.
type opCounters struct {
	ops [numOps]struct {
		calls, errors, nanos, bytes atomic.Int64
	}
}

// done records one request of kind o that started at start and was
// answered with *errno (deferred: the pointer is read when it returns).
func (c *opCounters) done(o op, start time.Time, errno *syscall.Errno) {
	s := &c.ops[o]
	s.calls.Add(1)
	s.nanos.Add(int64(time.Since(start)))
	if *errno != 0 {
		s.errors.Add(1)
	}
}

// moved adds n bytes read or written to o's counters.
func (c *opCounters) moved(o op, n int) { c.ops[o].bytes.Add(int64(n)) }

// OpStats are the cumulative counters of one kind of FUSE request.
type OpStats struct {
	Op     string        `json:"op"`
	Calls  int64         `json:"calls"`
	Errors int64         `json:"errors"`  // requests answered with an errno (ENOENT of a lookup included)
	Time   time.Duration `json:"time_ns"` // total time spent serving them
	Bytes  int64         `json:"bytes,omitempty"`
}

// Ops returns the mount's request counters since it was mounted, for every
// kind of request served at least once. They never decrease.
func (s *Server) Ops() []OpStats {
	var out []OpStats
	for i := range numOps {
		o := &s.root.fsys.ops.ops[i]
		if n := o.calls.Load(); n > 0 {
			out = append(out, OpStats{Op: opNames[i], Calls: n, Errors: o.errors.Load(),
				Time: time.Duration(o.nanos.Load()), Bytes: o.bytes.Load()})
		}
	}
	return out
}
