package posixtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// treeSpec describes a generated source-like tree.
type treeSpec struct {
	seed  uint64
	files int // regular files
	dirs  int // directories besides the root
	depth int // maximum nesting
	// special adds what only archivers and cp -a carry: hard links, a
	// FIFO, xattrs, setuid/sticky modes, empty directories, odd names,
	// dangling and absolute symlinks.
	special bool
}

// genTree writes a deterministic tree for spec under root (which must not
// exist) and sets every entry's atime and mtime to fixed, distinct
// nanosecond values, directories last. It returns the relative paths of
// the regular files it wrote.
func genTree(t testing.TB, root string, spec treeSpec) []string {
	t.Helper()
	r := rand.New(rand.NewPCG(spec.seed, spec.seed+1))
	ok(t, "mkdir "+root, os.Mkdir(root, 0o755))
	dirs := []string{"."}
	depth := map[string]int{".": 0}
	for i := range spec.dirs {
		var parent string
		for {
			parent = dirs[r.IntN(len(dirs))]
			if depth[parent] < spec.depth {
				break
			}
		}
		d := filepath.Join(parent, fmt.Sprintf("dir%03d", i))
		ok(t, "mkdir", os.Mkdir(filepath.Join(root, d), 0o755))
		dirs = append(dirs, d)
		depth[d] = depth[parent] + 1
	}
	exts := []string{".go", ".py", ".txt", ".json", ".md", ".c", ".bin"}
	var files []string
	for i := range spec.files {
		parent := dirs[r.IntN(len(dirs))]
		ext := exts[r.IntN(len(exts))]
		name := filepath.Join(parent, fmt.Sprintf("file%04d%s", i, ext))
		var size int
		switch x := r.IntN(100); {
		case x < 40:
			size = r.IntN(200)
		case x < 80:
			size = 200 + r.IntN(8000)
		case x < 97:
			size = 8192 + r.IntN(56<<10)
		default:
			size = 64<<10 + r.IntN(1<<20)
		}
		var data []byte
		if ext == ".bin" {
			data = randBytes(spec.seed*100000+uint64(i), size)
		} else {
			data = textBytes(r, size)
		}
		mode := os.FileMode(0o644)
		switch r.IntN(10) {
		case 0:
			mode = 0o755
		case 1:
			mode = 0o600
		}
		writeFile(t, filepath.Join(root, name), data, mode)
		ok(t, "chmod", os.Chmod(filepath.Join(root, name), mode))
		files = append(files, name)
	}
	// Symlinks to files and directories, relative across directories.
	for i := range max(1, spec.files/20) {
		from := dirs[r.IntN(len(dirs))]
		var to string
		if i%3 == 0 {
			to = dirs[r.IntN(len(dirs))]
		} else {
			to = files[r.IntN(len(files))]
		}
		rel, err := filepath.Rel(from, to)
		ok(t, "rel", err)
		ok(t, "symlink", os.Symlink(rel, filepath.Join(root, from, fmt.Sprintf("link%03d", i))))
	}
	if spec.special {
		special(t, root, r, dirs, files)
	}
	setTreeTimes(t, root, spec.seed)
	return files
}

// special adds the entries only archivers and cp -a carry.
func special(t testing.TB, root string, r *rand.Rand, dirs, files []string) {
	t.Helper()
	at := func(p string) string { return filepath.Join(root, p) }
	// Hard links: pairs within and across directories, and one triple.
	for i := range 4 {
		src := files[r.IntN(len(files))]
		ok(t, "link", os.Link(at(src), at(filepath.Join(dirs[r.IntN(len(dirs))], fmt.Sprintf("hardlink%d", i)))))
		if i == 0 {
			ok(t, "link", os.Link(at(src), at(fmt.Sprintf("hardlink%d-again", i))))
		}
	}
	ok(t, "mkfifo", unix.Mkfifo(at("a-fifo"), 0o640))
	ok(t, "chmod", os.Chmod(at("a-fifo"), 0o640))
	ok(t, "symlink", os.Symlink("does/not/exist", at("dangling")))
	ok(t, "symlink", os.Symlink("/absolute/elsewhere", at("absolute")))
	for _, d := range []string{"empty-dir", "empty-dir-2/nested"} {
		ok(t, "mkdir", os.MkdirAll(at(d), 0o755))
	}
	modes := []struct {
		name string
		mode uint32
		dir  bool
	}{
		{"setuid-prog", 0o4755, false}, {"setgid-prog", 0o2755, false}, {"readonly", 0o444, false},
		{"sticky-dir", 0o1777, true}, {"setgid-dir", 0o2775, true}, {"private-dir", 0o700, true},
	}
	if os.Geteuid() == 0 {
		// Unreadable to its owner: only root can archive or copy it.
		modes = append(modes, struct {
			name string
			mode uint32
			dir  bool
		}{"no-perms", 0o000, false})
	}
	for _, m := range modes {
		if m.dir {
			ok(t, "mkdir", os.Mkdir(at(m.name), 0o755))
			writeFile(t, at(filepath.Join(m.name, "inside")), []byte(m.name), 0o644)
		} else {
			writeFile(t, at(m.name), []byte(m.name), 0o644)
		}
		ok(t, "chmod", unix.Chmod(at(m.name), m.mode))
	}
	for i, name := range []string{"with space", "new\nline", "caf\u00e9", "\xff-latin1"} {
		writeFile(t, at(name), []byte(fmt.Sprint(i)), 0o644)
	}
	for i := range 6 {
		p := files[r.IntN(len(files))]
		ok(t, "setxattr", unix.Setxattr(at(p), fmt.Sprintf("user.attr%d", i), randBytes(uint64(i), 1+r.IntN(200)), 0))
	}
	ok(t, "setxattr", unix.Setxattr(at(dirs[len(dirs)-1]), "user.on-dir", []byte("dir value"), 0))
	ok(t, "setxattr", unix.Setxattr(at("empty-dir"), "user.empty-value", nil, 0))
}

// textBytes returns size bytes of source-like text.
func textBytes(r *rand.Rand, size int) []byte {
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "the", "value", "x", "{", "}", "//", "import", "package", "int", "string"}
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(words[r.IntN(len(words))])
		if r.IntN(8) == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return []byte(b.String()[:size])
}

// setTreeTimes gives every entry under root (root included) fixed, distinct
// atime and mtime values derived from its path, with nanoseconds, children
// before their directory.
func setTreeTimes(t testing.TB, root string, seed uint64) {
	t.Helper()
	var paths []string
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		paths = append(paths, p)
		return err
	})
	ok(t, "walk", err)
	slices.Reverse(paths) // children before parents
	for i, p := range paths {
		base := 1_400_000_000 + int64(seed%1000)*1000 + int64(i)*7
		at := unix.Timespec{Sec: base, Nsec: int64(i*7919+1) % 1_000_000_000}
		mt := unix.Timespec{Sec: base + 3600, Nsec: int64(i*104729+3) % 1_000_000_000}
		ok(t, "utimensat "+p, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{at, mt}, unix.AT_SYMLINK_NOFOLLOW))
	}
}
