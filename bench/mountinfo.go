package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	MountPoint string
	FSType     string
	Source     string
}

// parseMountinfo reads the mountinfo format of proc(5).
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return nil, fmt.Errorf("mountinfo line without separator: %q", line)
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 2 {
			return nil, fmt.Errorf("short mountinfo line: %q", line)
		}
		out = append(out, mountEntry{MountPoint: unescapeOctal(f[4]), FSType: g[0], Source: unescapeOctal(g[1])})
	}
	return out, sc.Err()
}

// unescapeOctal undoes the \ooo escapes the kernel applies to spaces,
// tabs, newlines and backslashes in mountinfo.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// findMount returns the entry whose mount point is the longest prefix of
// the absolute, symlink-free path p (the last such line wins, as later
// mounts hide earlier ones).
func findMount(entries []mountEntry, p string) (mountEntry, bool) {
	var best mountEntry
	found := false
	for _, m := range entries {
		if !pathWithin(p, m.MountPoint) {
			continue
		}
		if !found || len(m.MountPoint) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	return best, found
}

// pathWithin reports whether p is dir or lies below it.
func pathWithin(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// mountOf returns the mount holding dir, read from /proc/self/mountinfo.
func mountOf(dir string) (mountEntry, error) {
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return mountEntry{}, err
	}
	p, err = filepath.Abs(p)
	if err != nil {
		return mountEntry{}, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, err
	}
	defer f.Close()
	entries, err := parseMountinfo(f)
	if err != nil {
		return mountEntry{}, err
	}
	m, ok := findMount(entries, p)
	if !ok {
		return mountEntry{}, fmt.Errorf("no mount holds %s", p)
	}
	return m, nil
}

// isFUSEMountPoint reports whether the absolute, clean path dir is itself a
// mount point of a FUSE filesystem in /proc/self/mountinfo.
func isFUSEMountPoint(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	entries, err := parseMountinfo(f)
	if err != nil {
		return false, err
	}
	for _, m := range entries {
		if m.MountPoint == dir && (m.FSType == "fuse" || strings.HasPrefix(m.FSType, "fuse.")) {
			return true, nil
		}
	}
	return false, nil
}
