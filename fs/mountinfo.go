package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo struct {
	MountPoint string // absolute path, unescaped
	FSType     string // for example "fuse.agentfs"
	Source     string // the mount's source (FUSE: the fsname), unescaped
	Dev        string // "major:minor"
}

// ReadMountInfo returns the mounts of this process's mount namespace, in
// the order the kernel lists them (a later mount on the same point hides
// an earlier one).
func ReadMountInfo() ([]MountInfo, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return ParseMountInfo(b), nil
}

// ParseMountInfo parses the text of a mountinfo file (see proc(5)); lines
// it cannot parse are skipped.
func ParseMountInfo(b []byte) []MountInfo {
	var out []MountInfo
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+3 {
			continue
		}
		out = append(out, MountInfo{
			MountPoint: unescapeMountInfo(f[4]),
			Dev:        f[2],
			FSType:     f[sep+1],
			Source:     unescapeMountInfo(f[sep+2]),
		})
	}
	return out
}

// unescapeMountInfo undoes the octal escapes (\040 for a space, ...) of a
// mountinfo field.
func unescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// MountOf returns the mount that holds path (absolute and clean): the
// mount with the longest mount point that is path or a parent of it, the
// last listed if several share that point.
func MountOf(path string) (MountInfo, error) {
	ms, err := ReadMountInfo()
	if err != nil {
		return MountInfo{}, err
	}
	best, found := MountInfo{}, false
	for _, m := range ms {
		if !within(path, m.MountPoint) {
			continue
		}
		if !found || len(m.MountPoint) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	if !found {
		return MountInfo{}, fmt.Errorf("no mount holds %s", path)
	}
	return best, nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
