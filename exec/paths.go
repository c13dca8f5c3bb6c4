package exec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSymlinkHops bounds symlink resolution, as the kernel's ELOOP does.
const maxSymlinkHops = 40

// resolve turns a caller's path (relative to this backend's scope) into a
// clean, slash-separated path relative to the top workspace root, with every
// symlink in its directories resolved, and the last component too when
// follow is set. It refuses, with a *PathError, absolute paths, "~" paths,
// ".." climbing above the scope, absolute symlinks, and relative symlinks
// that climb above the scope. Missing components are taken lexically (a
// Write creates them), which cannot leave the scope either.
//
// resolve is a check with a clear error, not the security boundary: every
// operation then goes through os.Root, which refuses escapes even when the
// tree changes between the check and the use.
func (b *Backend) resolve(op, p string, follow bool) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%s %q: %w: path contains a NUL byte", op, p, ErrInvalid)
	}
	if strings.HasPrefix(p, "/") {
		return "", &PathError{Op: op, Path: p, Reason: "absolute path"}
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		return "", &PathError{Op: op, Path: p, Reason: "home-relative path"}
	}
	var stack []string
	if b.prefix != "" {
		stack = strings.Split(b.prefix, "/")
	}
	bound := len(stack)
	queue := splitPath(p)
	hops := 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == bound {
				return "", &PathError{Op: op, Path: p, Reason: `".." climbs out of the root`}
			}
			stack = stack[:len(stack)-1]
			continue
		}
		cand := path.Join(append(append([]string{}, stack...), c)...)
		if len(queue) == 0 && !follow {
			stack = append(stack, c)
			continue
		}
		fi, err := b.s.root.Lstat(cand)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			// Missing, not a symlink, or unreadable: take it as it is and
			// let the operation itself report what is wrong.
			stack = append(stack, c)
			continue
		}
		hops++
		if hops > maxSymlinkHops {
			return "", fmt.Errorf("%s %q: %w: too many levels of symbolic links", op, p, ErrInvalid)
		}
		target, err := b.s.root.Readlink(cand)
		if errors.Is(err, syscall.EINVAL) {
			// No longer a symlink (renamed over since the Lstat): take it
			// as it is, as above.
			stack = append(stack, c)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", op, p, err)
		}
		if strings.HasPrefix(target, "/") {
			return "", &PathError{Op: op, Path: p, Reason: fmt.Sprintf("symlink %s -> %s is absolute", b.display(cand), target)}
		}
		// A relative target is relative to the link's directory, which is
		// the current stack: resolve its components before the rest.
		queue = append(splitPath(target), queue...)
		// The link's own ".." must not climb above the scope either; that
		// is checked as the components are consumed.
	}
	if len(stack) == 0 {
		return ".", nil
	}
	return path.Join(stack...), nil
}

// splitPath splits a slash-separated path into its components.
func splitPath(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// display turns a root-relative path back into one relative to this
// backend's scope, for error messages and results.
func (b *Backend) display(rel string) string {
	if b.prefix == "" {
		return rel
	}
	if rel == b.prefix {
		return "."
	}
	if r, ok := strings.CutPrefix(rel, b.prefix+"/"); ok {
		return r
	}
	return rel
}

// errRootEscape is the error os.Root gives for a path that resolves out of
// it (os keeps the sentinel unexported): the error of a Lstat of ".." in a
// root of "/".
var errRootEscape = sync.OnceValue(func() error {
	r, err := os.OpenRoot("/")
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	_, err = r.Lstat("..")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
})

// rootEscape returns os.Root's refusal of a path that resolves out of it
// (the tree changed after resolve checked it) as a *PathError, and nil for
// any other error.
func rootEscape(op, p string, err error) *PathError {
	if re := errRootEscape(); re == nil || !errors.Is(err, re) {
		return nil
	}
	return &PathError{Op: op, Path: p, Reason: "it resolves out of the root (a symlink on the way changed while it was used)"}
}

// errPathOp rewrites the path inside an *fs.PathError returned by os.Root so
// that it names the caller's path, and keeps it wrapped for errors.Is
// (fs.ErrNotExist and friends); os.Root's refusal of a path that resolves
// out of it is a *PathError (rootEscape).
func (b *Backend) errPathOp(op, p string, err error) error {
	if err == nil {
		return nil
	}
	if pe := rootEscape(op, p, err); pe != nil {
		return pe
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %q: %w", op, p, pe.Err)
	}
	return fmt.Errorf("%s %q: %w", op, p, err)
}

// openDir opens the directory at rel (root-relative, as resolve returns it,
// for the caller's path p) with O_PATH, through an os.Root of this backend's
// scope: every component is opened relative to its parent without following
// a symlink out of the scope, so the descriptor names a directory that was
// inside the scope when it was opened, whatever is renamed around it later.
// A path that is not a directory gives ErrInvalid. The caller closes the
// file.
func (b *Backend) openDir(op, p, rel string) (*os.File, error) {
	root := b.s.root
	if b.prefix != "" {
		sr, err := root.OpenRoot(b.prefix)
		if err != nil {
			return nil, b.errPathOp(op, p, err)
		}
		defer func() { _ = sr.Close() }()
		root = sr
		rel = strings.TrimPrefix(strings.TrimPrefix(rel, b.prefix), "/")
		if rel == "" {
			rel = "."
		}
	}
	f, err := root.OpenFile(rel, unix.O_PATH|unix.O_DIRECTORY, 0)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("%s %q: %w: not a directory", op, p, ErrInvalid)
	}
	if err != nil {
		return nil, b.errPathOp(op, p, err)
	}
	return f, nil
}
