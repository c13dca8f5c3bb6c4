package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// File operations. They run in the controller process, on the host
// directory (for docker too: the container sees the same directory through
// its bind mount), through an os.Root, so no path can leave the workspace
// even when the tree changes underneath; paths are relative to the backend's
// root and the checks of resolve apply (a *PathError otherwise). Missing
// paths give errors satisfying errors.Is(err, fs.ErrNotExist).
//
// Ownership: the local backend creates files as the controller's user,
// which is also the commands' user. The docker backend, when the controller
// runs as root, gives what file operations create (files, parent
// directories, copies) to the container's uid:gid, so that the commands can
// modify them; a non-root controller cannot, and its files stay its own.

// FileType is the kind of a directory entry.
type FileType int

// The kinds of directory entries.
const (
	TypeFile FileType = iota + 1
	TypeDir
	TypeSymlink
	TypeOther
)

// String returns "file", "dir", "symlink" or "other".
func (t FileType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	default:
		return "other"
	}
}

// FileInfo describes one entry, without following a final symlink.
type FileInfo struct {
	// Path is relative to the backend's root, slash separated.
	Path    string
	Name    string
	Type    FileType
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
}

func fileInfo(p string, fi fs.FileInfo) FileInfo {
	t := TypeOther
	switch m := fi.Mode(); {
	case m.IsRegular():
		t = TypeFile
	case m.IsDir():
		t = TypeDir
	case m&fs.ModeSymlink != 0:
		t = TypeSymlink
	}
	return FileInfo{Path: p, Name: path.Base(p), Type: t, Size: fi.Size(), Mode: fi.Mode(), ModTime: fi.ModTime()}
}

// binarySniff is how much of a file is looked at for a NUL byte.
const binarySniff = 8 << 10

func isBinary(data []byte) bool {
	if len(data) > binarySniff {
		data = data[:binarySniff]
	}
	return bytes.IndexByte(data, 0) >= 0
}

// ReadFile returns the whole content of the file at p, any bytes.
func (b *Backend) ReadFile(ctx context.Context, p string) ([]byte, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	rel, err := b.resolve("read", p, true)
	if err != nil {
		return nil, err
	}
	data, err := b.s.root.ReadFile(rel)
	if err != nil {
		return nil, b.errPathOp("read", p, err)
	}
	return data, nil
}

// Read returns lines of the text file at p in cat -n style: each line as
// its 1-based number right-aligned in six columns, a tab, the line and a
// newline. offset is the number of lines to skip (0 starts at the first
// line), limit the number to return (0 means DefaultReadLimit). An offset
// at or past the end of a non-empty file is an error wrapping ErrOutOfRange
// that says how many lines the file has; an empty file reads as "". A
// binary file gives ErrBinary (use ReadFile).
func (b *Backend) Read(ctx context.Context, p string, offset, limit int) (string, error) {
	if offset < 0 || limit < 0 {
		return "", fmt.Errorf("read %q: %w: negative offset or limit", p, ErrInvalid)
	}
	if limit == 0 {
		limit = DefaultReadLimit
	}
	data, err := b.ReadFile(ctx, p)
	if err != nil {
		return "", err
	}
	if isBinary(data) {
		return "", fmt.Errorf("read %q: %w (%d bytes); read it as bytes", p, ErrBinary, len(data))
	}
	if len(data) == 0 {
		return "", nil
	}
	lines := strings.SplitAfter(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if offset >= len(lines) {
		return "", fmt.Errorf("read %q: %w: offset %d, the file has %d lines", p, ErrOutOfRange, offset, len(lines))
	}
	end := min(offset+limit, len(lines))
	var sb strings.Builder
	for i := offset; i < end; i++ {
		fmt.Fprintf(&sb, "%6d\t%s\n", i+1, strings.TrimSuffix(lines[i], "\n"))
	}
	return sb.String(), nil
}

// WriteFile writes data to the file at p, creating it (mode 0644) and its
// missing parent directories (0755), or truncating it. A final symlink is
// followed, within the root.
func (b *Backend) WriteFile(ctx context.Context, p string, data []byte) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	rel, err := b.resolve("write", p, true)
	if err != nil {
		return err
	}
	if err := b.mkdirParents("write", p, path.Dir(rel)); err != nil {
		return err
	}
	_, statErr := b.s.root.Lstat(rel)
	if err := b.s.root.WriteFile(rel, data, 0o644); err != nil {
		return b.errPathOp("write", p, err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		return b.chown("write", p, rel)
	}
	return nil
}

// mkdirParents creates the missing directories of the root-relative dir,
// one by one, giving each to the owner.
func (b *Backend) mkdirParents(op, p, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		cur := strings.Join(parts[:i+1], "/")
		err := b.s.root.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			if err := b.chown(op, p, cur); err != nil {
				return err
			}
		case errors.Is(err, fs.ErrExist):
		default:
			return b.errPathOp(op, p, err)
		}
	}
	return nil
}

// chown gives a root-relative path the docker backend's owner, if any.
func (b *Backend) chown(op, p, rel string) error {
	if b.s.owner == nil {
		return nil
	}
	if err := b.s.root.Lchown(rel, b.s.owner.uid, b.s.owner.gid); err != nil {
		return b.errPathOp(op, p, err)
	}
	return nil
}

// Edit replaces oldStr with newStr in the text file at p and returns the
// number of replacements. oldStr must occur exactly once unless replaceAll
// is set: none gives ErrNoMatch, several (without replaceAll) ErrNotUnique
// and the count; the file is then unchanged. An empty oldStr gives
// ErrInvalid, a binary file ErrBinary. The file keeps its mode and owner.
func (b *Backend) Edit(ctx context.Context, p, oldStr, newStr string, replaceAll bool) (int, error) {
	if oldStr == "" {
		return 0, fmt.Errorf("edit %q: %w: empty old string", p, ErrInvalid)
	}
	if err := b.check(ctx); err != nil {
		return 0, err
	}
	rel, err := b.resolve("edit", p, true)
	if err != nil {
		return 0, err
	}
	data, err := b.s.root.ReadFile(rel)
	if err != nil {
		return 0, b.errPathOp("edit", p, err)
	}
	if isBinary(data) {
		return 0, fmt.Errorf("edit %q: %w", p, ErrBinary)
	}
	n := strings.Count(string(data), oldStr)
	switch {
	case n == 0:
		return 0, fmt.Errorf("edit %q: %w", p, ErrNoMatch)
	case n > 1 && !replaceAll:
		return 0, fmt.Errorf("edit %q: %w: %d occurrences; give more context or replace all", p, ErrNotUnique, n)
	}
	out := strings.ReplaceAll(string(data), oldStr, newStr)
	f, err := b.s.root.OpenFile(rel, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return 0, b.errPathOp("edit", p, err)
	}
	_, werr := io.WriteString(f, out)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return 0, b.errPathOp("edit", p, err)
	}
	return n, nil
}

// Stat describes the entry at p without following a final symlink.
func (b *Backend) Stat(ctx context.Context, p string) (FileInfo, error) {
	if err := b.check(ctx); err != nil {
		return FileInfo{}, err
	}
	rel, err := b.resolve("stat", p, false)
	if err != nil {
		return FileInfo{}, err
	}
	fi, err := b.s.root.Lstat(rel)
	if err != nil {
		return FileInfo{}, b.errPathOp("stat", p, err)
	}
	return fileInfo(b.display(rel), fi), nil
}

// Exists reports whether an entry exists at p (a dangling symlink exists).
// A missing path is (false, nil); a path that escapes is an error.
func (b *Backend) Exists(ctx context.Context, p string) (bool, error) {
	_, err := b.Stat(ctx, p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}

// List returns the entries of the directory at p ("" or "." for the root),
// sorted by name, without following symlinks.
func (b *Backend) List(ctx context.Context, p string) ([]FileInfo, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if p == "" {
		p = "."
	}
	rel, err := b.resolve("list", p, true)
	if err != nil {
		return nil, err
	}
	ents, err := fs.ReadDir(b.s.root.FS(), rel)
	if err != nil {
		return nil, b.errPathOp("list", p, err)
	}
	out := make([]FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, b.errPathOp("list", p, err)
		}
		out = append(out, fileInfo(b.display(path.Join(rel, e.Name())), fi))
	}
	return out, nil
}

// Mkdir creates the directory at p (0755); with parents, it creates the
// missing parents too and an existing directory is not an error (as
// mkdir -p).
func (b *Backend) Mkdir(ctx context.Context, p string, parents bool) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	rel, err := b.resolve("mkdir", p, true)
	if err != nil {
		return err
	}
	if rel == b.relOrDot() {
		if parents {
			return nil
		}
		return fmt.Errorf("mkdir %q: %w", p, fs.ErrExist)
	}
	if parents {
		if err := b.mkdirParents("mkdir", p, rel); err != nil {
			return err
		}
		fi, err := b.s.root.Stat(rel)
		if err != nil {
			return b.errPathOp("mkdir", p, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("mkdir %q: %w: not a directory", p, fs.ErrExist)
		}
		return nil
	}
	if err := b.s.root.Mkdir(rel, 0o755); err != nil {
		return b.errPathOp("mkdir", p, err)
	}
	return b.chown("mkdir", p, rel)
}

// Remove removes the entry at p (a symlink itself, not its target). A
// non-empty directory needs recursive. The backend's root cannot be
// removed (ErrInvalid). A missing path is an error wrapping fs.ErrNotExist.
func (b *Backend) Remove(ctx context.Context, p string, recursive bool) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	rel, err := b.resolve("remove", p, false)
	if err != nil {
		return err
	}
	if rel == b.relOrDot() {
		return fmt.Errorf("remove %q: %w: that is the root of the backend", p, ErrInvalid)
	}
	if _, err := b.s.root.Lstat(rel); err != nil {
		return b.errPathOp("remove", p, err)
	}
	if recursive {
		err = b.s.root.RemoveAll(rel)
	} else {
		err = b.s.root.Remove(rel)
	}
	return b.errPathOp("remove", p, err)
}

// Rename moves the entry at from to to (rename(2) semantics: an existing
// file at to is replaced; to's parent must exist). Neither may be the root.
func (b *Backend) Rename(ctx context.Context, from, to string) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	rf, err := b.resolve("rename", from, false)
	if err != nil {
		return err
	}
	rt, err := b.resolve("rename", to, false)
	if err != nil {
		return err
	}
	if rf == b.relOrDot() || rt == b.relOrDot() {
		return fmt.Errorf("rename %q to %q: %w: the root of the backend cannot be renamed", from, to, ErrInvalid)
	}
	if err := b.s.root.Rename(rf, rt); err != nil {
		if pe := rootEscape("rename", from+" -> "+to, err); pe != nil {
			return pe
		}
		return fmt.Errorf("rename %q to %q: %w", from, to, unwrapPathErr(err))
	}
	return nil
}

// Copy copies the regular file at from to to (created 0644 with missing
// parents, or truncated), following symlinks within the root.
func (b *Backend) Copy(ctx context.Context, from, to string) error {
	data, err := b.ReadFile(ctx, from)
	if err != nil {
		return err
	}
	return b.WriteFile(ctx, to, data)
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// Glob returns the paths under the backend's root that match pattern,
// sorted. pattern is slash separated and relative; each segment is a
// path.Match pattern (*, ?, [...]) except "**", which matches any number of
// directories, zero included ("**/*.go" finds every .go file). Hidden files
// are matched like any other. Symlinks are matched but not followed.
func (b *Backend) Glob(ctx context.Context, pattern string) ([]string, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if pattern == "" {
		return nil, fmt.Errorf("glob: %w: empty pattern", ErrInvalid)
	}
	if strings.HasPrefix(pattern, "/") {
		return nil, &PathError{Op: "glob", Path: pattern, Reason: "absolute path"}
	}
	segs := strings.Split(path.Clean(pattern), "/")
	for _, s := range segs {
		if s == ".." {
			return nil, &PathError{Op: "glob", Path: pattern, Reason: `".." in a pattern`}
		}
		if _, err := path.Match(s, ""); err != nil {
			return nil, fmt.Errorf("glob %q: %w: %w", pattern, ErrInvalid, err)
		}
	}
	if !hasMeta(pattern) {
		ok, err := b.Exists(ctx, pattern)
		if err != nil || !ok {
			return nil, err
		}
		return []string{path.Clean(pattern)}, nil
	}
	// Walk from the longest literal prefix only.
	lit := 0
	for lit < len(segs)-1 && !hasMeta(segs[lit]) {
		lit++
	}
	start := strings.Join(segs[:lit], "/")
	if start == "" {
		start = "."
	}
	base, err := b.resolve("glob", start, true)
	if err != nil {
		return nil, err
	}
	var out []string
	fsys := b.s.root.FS()
	n := 0
	err = fs.WalkDir(fsys, base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == base && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
				return nil
			}
			return err
		}
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if p == base {
			return nil
		}
		relToBase := strings.TrimPrefix(p, base+"/")
		if base == "." {
			relToBase = p
		}
		if matchGlob(segs[lit:], strings.Split(relToBase, "/")) {
			out = append(out, path.Join(start, relToBase))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("glob %q: %w", pattern, err)
	}
	sort.Strings(out)
	return out, nil
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// matchGlob matches path segments against pattern segments, "**" matching
// zero or more segments.
func matchGlob(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if matchGlob(pat, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
