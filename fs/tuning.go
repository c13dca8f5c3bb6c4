package fs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Tuning of the FUSE connection. Each value was measured with
// scripts/mount-perf.sh against go-fuse's loopback; see fs/doc.go.
const (
	maxWrite      = 1 << 20 // bytes per WRITE and READ request
	maxReadAhead  = 1 << 20 // bytes the kernel reads ahead of a sequential reader
	maxBackground = 64      // asynchronous requests (read-ahead, write-back) in flight
	// readAheadKB is the kernel's read-ahead window for the mount (the
	// bdi's read_ahead_kb, set through sysfs when the server may): one
	// engine chunk. FUSE_INIT can only lower the kernel's 128 KiB default.
	readAheadKB = 4096
)

// Tuning overrides the mount's FUSE settings, which were chosen by
// measurement (see doc.go). The zero value changes nothing. It exists for
// the experiments of scripts/mount-perf.sh, not for production use.
type Tuning struct {
	// Writeback enables the kernel's write-back cache.
	Writeback bool
	// NoKeepCache drops a file's page cache at every open.
	NoKeepCache bool
	// NoDirCache makes the kernel read directories from the server at
	// every listing.
	NoDirCache bool
	// MaxWrite, MaxReadAhead and MaxBackground override the request size,
	// the read-ahead requested at FUSE_INIT and the asynchronous requests
	// in flight (0: the defaults).
	MaxWrite, MaxReadAhead, MaxBackground int
	// ReadAheadKB overrides the read-ahead window set through sysfs (0:
	// the default).
	ReadAheadKB int
	// PosixACL negotiates FUSE_POSIX_ACL: the kernel enforces POSIX ACLs
	// and caches them per inode, and the mount serves the ACL attributes
	// (without it they are EOPNOTSUPP; see doc.go, "Extended attributes").
	// An experiment only: the engine keeps no ACL (setting one fails), so
	// the kernel caches "none" per inode (one GETXATTR per file and
	// listing cold); and new files would need their directory's default
	// ACL, which the kernel leaves to the server.
	PosixACL bool
	// DirectWrite opens files opened for writing only (creates included)
	// with FOPEN_DIRECT_IO: their writes skip the page cache and the
	// kernel's check for privileges to drop, the GETXATTR of
	// security.capability at the first write of every new file (see
	// doc.go). The server drops the set-user-ID bits itself when the
	// kernel asks (FUSE_WRITE_KILL_SUIDGID: a caller without CAP_FSETID)
	// and the capabilities after every write, whoever the caller, as ext4
	// does (rawFS.afterWrite). What was written is not in the page cache
	// afterwards.
	DirectWrite bool
	// NoFlush answers the first FLUSH with ENOSYS, after which the kernel
	// sends none. Without it a descriptor's close(2) sends FLUSH only if
	// the descriptor may write while someone reads the change feed (see
	// doc.go); with it, not then either, and the feed reports what a
	// descriptor wrote at its release instead of at its close.
	NoFlush bool
	// Passthrough lets a read-only open of a file whose whole content is
	// in its local data file have the kernel read that file directly
	// (FUSE passthrough; see passthrough.go), when the kernel offers
	// passthrough (6.9 or later) and the server runs as root.
	Passthrough bool
}

func (t Tuning) withDefaults() Tuning {
	if t.MaxWrite <= 0 {
		t.MaxWrite = maxWrite
	}
	if t.MaxReadAhead <= 0 {
		t.MaxReadAhead = maxReadAhead
	}
	if t.MaxBackground <= 0 {
		t.MaxBackground = maxBackground
	}
	if t.ReadAheadKB <= 0 {
		t.ReadAheadKB = readAheadKB
	}
	return t
}

// ParseTuning reads a Tuning from its text form: comma-separated
// key=value pairs among writeback=0|1, keepcache=0|1, dircache=0|1,
// maxwrite=BYTES, readahead=BYTES, background=N, readahead_kb=KIB,
// posixacl=0|1, flush=0|1, directwrite=0|1, passthrough=0|1.
func ParseTuning(s string) (Tuning, error) {
	var t Tuning
	for kv := range strings.SplitSeq(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return t, fmt.Errorf("tuning %q: %q is not a non-negative number", kv, v)
		}
		switch k {
		case "writeback":
			t.Writeback = n != 0
		case "keepcache":
			t.NoKeepCache = n == 0
		case "dircache":
			t.NoDirCache = n == 0
		case "maxwrite":
			t.MaxWrite = n
		case "readahead":
			t.MaxReadAhead = n
		case "background":
			t.MaxBackground = n
		case "readahead_kb":
			t.ReadAheadKB = n
		case "posixacl":
			t.PosixACL = n != 0
		case "flush":
			t.NoFlush = n == 0
		case "directwrite":
			t.DirectWrite = n != 0
		case "passthrough":
			t.Passthrough = n != 0
		default:
			return t, fmt.Errorf("tuning %q: unknown key %q", kv, k)
		}
	}
	return t, nil
}

// setReadAhead sets the kernel's read-ahead window of the mount with
// device dev ("major:minor") to kb KiB, through
// /sys/class/bdi/DEV/read_ahead_kb (writable by root only).
func setReadAhead(dev string, kb int) error {
	return os.WriteFile("/sys/class/bdi/"+dev+"/read_ahead_kb", []byte(strconv.Itoa(kb)), 0)
}
