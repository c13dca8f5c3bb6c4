package fs

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/internal/mountinfo"
)

// IsMountPoint reports whether dir (absolute, clean) is the mount point of
// some mount in this process's mount namespace, from /proc/self/mountinfo
// (no request reaches the mount itself, so a dead mount answers too).
func IsMountPoint(dir string) (bool, error) {
	ms, err := ReadMountInfo()
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.MountPoint == dir {
			return true, nil
		}
	}
	return false, nil
}

// CleanStale checks the directory dir before a mount: if it is the mount
// point of a FUSE mount whose server is gone (statfs fails with ENOTCONN,
// "transport endpoint is not connected"), it is detached lazily and
// CleanStale reports true. Any other state of dir is left alone. (stat is
// no test: the kernel may answer it from its cache after the server died;
// statfs always asks the server.) A mount whose server is alive but hung
// makes CleanStale wait with it.
func CleanStale(dir string) (bool, error) {
	on, err := IsMountPoint(dir)
	if err != nil || !on {
		return false, err
	}
	if !IsDisconnected(dir) {
		return false, nil
	}
	if err := Unmount(dir, true); err != nil && !errors.Is(err, ErrNotMounted) {
		return false, fmt.Errorf("clean up the stale mount on %s: %w", dir, err)
	}
	return true, nil
}

// IsDisconnected reports whether dir lies in a FUSE mount whose server is
// gone: statfs fails with ENOTCONN.
func IsDisconnected(dir string) bool {
	var st unix.Statfs_t
	return errors.Is(unix.Statfs(dir, &st), syscall.ENOTCONN)
}

// MountInfo is one line of /proc/self/mountinfo (see internal/mountinfo,
// which reads the table for fs/ and bench/ alike).
type MountInfo = mountinfo.Mount

// ReadMountInfo returns the mounts of this process's mount namespace, in
// the order the kernel lists them (a later mount on the same point hides
// an earlier one).
func ReadMountInfo() ([]MountInfo, error) { return mountinfo.Read() }

// ParseMountInfo parses the text of a mountinfo file (see proc(5)); lines
// it cannot parse are skipped.
func ParseMountInfo(b []byte) []MountInfo { return mountinfo.Parse(b) }

// MountOf returns the mount that holds path (absolute and clean): the
// mount with the longest mount point that is path or a parent of it, the
// last listed if several share that point.
func MountOf(path string) (MountInfo, error) { return mountinfo.Of(path) }

// within reports whether path is dir or lies below it.
func within(path, dir string) bool { return mountinfo.Within(path, dir) }
