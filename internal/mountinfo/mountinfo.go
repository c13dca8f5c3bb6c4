// Package mountinfo reads the mount table of this process's mount
// namespace, /proc/self/mountinfo (see proc(5)), without touching any
// mount, so a dead FUSE mount answers too. fs/ (mount lifecycle) and bench/
// (which mount a benchmark runs on) share it; it imports no agentfs package.
package mountinfo

import (
	"fmt"
	"os"
	"strings"
)

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	MountPoint string // absolute path, unescaped
	FSType     string // for example "fuse.agentfs"
	Source     string // the mount's source (FUSE: the fsname), unescaped
	Dev        string // "major:minor"
}

// IsFUSE reports whether m is a FUSE mount (type "fuse" or "fuse.*").
func (m Mount) IsFUSE() bool {
	return m.FSType == "fuse" || strings.HasPrefix(m.FSType, "fuse.")
}

// Read returns the mounts of this process's mount namespace, in the order
// the kernel lists them (a later mount on the same point hides an earlier
// one).
func Read() ([]Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return Parse(b), nil
}

// Parse parses the text of a mountinfo file (see proc(5)); lines it cannot
// parse are skipped.
func Parse(b []byte) []Mount {
	var out []Mount
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
		out = append(out, Mount{
			MountPoint: unescape(f[4]),
			Dev:        f[2],
			FSType:     f[sep+1],
			Source:     unescape(f[sep+2]),
		})
	}
	return out
}

// unescape undoes the octal escapes (\040 for a space, ...) the kernel
// applies to spaces, tabs, newlines and backslashes in a mountinfo field.
func unescape(s string) string {
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

// Find returns the mount of ms that holds path (absolute and clean): the
// one with the longest mount point that is path or a parent of it, the last
// listed if several share that point. ok is false if none does.
func Find(ms []Mount, path string) (m Mount, ok bool) {
	for _, x := range ms {
		if !Within(path, x.MountPoint) {
			continue
		}
		if !ok || len(x.MountPoint) >= len(m.MountPoint) {
			m, ok = x, true
		}
	}
	return m, ok
}

// Of returns the mount that holds path (absolute and clean), as Find does
// over Read's table.
func Of(path string) (Mount, error) {
	ms, err := Read()
	if err != nil {
		return Mount{}, err
	}
	m, ok := Find(ms, path)
	if !ok {
		return Mount{}, fmt.Errorf("no mount holds %s", path)
	}
	return m, nil
}

// Within reports whether path is dir or lies below it (both absolute and
// clean).
func Within(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}
