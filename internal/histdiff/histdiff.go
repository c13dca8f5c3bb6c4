// Package histdiff renders the differences between two stored trees for
// people and programs: one flat, JSON-encodable Change per path (what
// `agentfs snapshot diff --json` prints and what a mount's control socket
// streams), its one-line form, a summary, and unified content diffs of text
// files. The command line and the mount server both use it, so a diff reads
// the same whether it was computed from a store URL or by a live mount.
//
// It owns no format and no policy: the tree comparison is snapshot.Repo.Diff.
package histdiff

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentfs/agentfs/internal/udiff"
	"github.com/agentfs/agentfs/snapshot"
)

// Change is one difference between two trees, flattened for display and
// JSON. Sizes and modes are 0 for a side that does not exist.
type Change struct {
	Op      string `json:"op"` // "added", "modified" or "deleted"
	Path    string `json:"path"`
	Type    string `json:"type"`               // the newest side's type (snapshot.EntryType.String)
	OldType string `json:"old_type,omitempty"` // set when a modification changed the type
	OldSize uint64 `json:"old_size"`
	NewSize uint64 `json:"new_size"`
	// What lists what a modification changed, comma-separated: content,
	// type, mode, owner, xattrs, target, rdev (snapshot.ChangeFlags).
	What      string `json:"what,omitempty"`
	OldMode   uint32 `json:"old_mode,omitempty"`
	NewMode   uint32 `json:"new_mode,omitempty"`
	OldTarget string `json:"old_target,omitempty"` // symlinks whose target changed
	NewTarget string `json:"new_target,omitempty"`
	// Patch is the unified content diff (or a one-line note for binary or
	// too large files); only filled when asked for, and only for files.
	Patch string `json:"patch,omitempty"`

	flags snapshot.ChangeFlags
	dir   bool
}

// FromSnapshot flattens a snapshot.Change.
func FromSnapshot(c snapshot.Change) Change {
	e := c.Entry()
	out := Change{Op: c.Op.String(), Path: c.Path, Type: e.Type.String(), dir: e.Type == snapshot.TypeDir}
	out.OldSize, out.NewSize = c.Sizes()
	if c.Old != nil {
		out.OldMode = c.Old.Mode
	}
	if c.New != nil {
		out.NewMode = c.New.Mode
	}
	if c.Op == snapshot.Modified {
		out.flags = c.What
		out.What = c.What.String()
		if c.Old.Type != c.New.Type {
			out.OldType = c.Old.Type.String()
		}
		if c.What&snapshot.ChangedTarget != 0 {
			out.OldTarget, out.NewTarget = c.Old.Target, c.New.Target
		}
	}
	return out
}

// IsDir reports whether the newest side is a directory.
func (c Change) IsDir() bool { return c.dir || c.Type == snapshot.TypeDir.String() }

// DirOnly reports whether the path is a directory on every side where it
// exists: false for a file, and for a path that changed between a
// directory and something else.
func (c Change) DirOnly() bool {
	return c.IsDir() && (c.OldType == "" || c.OldType == snapshot.TypeDir.String())
}

// Flags returns what a modification changed.
func (c Change) Flags() snapshot.ChangeFlags {
	if c.flags != 0 || c.What == "" {
		return c.flags
	}
	var f snapshot.ChangeFlags
	for _, name := range strings.Split(c.What, ",") {
		for bit := snapshot.ChangedContent; bit <= snapshot.ChangedRdev; bit <<= 1 {
			if bit.String() == name {
				f |= bit
			}
		}
	}
	return f
}

// Letter returns 'A', 'M' or 'D'.
func (c Change) Letter() byte {
	switch c.Op {
	case "added":
		return 'A'
	case "deleted":
		return 'D'
	}
	return 'M'
}

// Line is the one-line form: "A  path  (size)", "D  path  (size)" or
// "M  path  [what]  details"; directories end in '/'.
func (c Change) Line() string {
	p := c.Path
	if c.IsDir() && p != "." {
		p += "/"
	}
	switch c.Letter() {
	case 'A':
		if c.IsDir() {
			return "A  " + p
		}
		return fmt.Sprintf("A  %s  (%s)", p, FmtSize(int64(c.NewSize)))
	case 'D':
		if c.IsDir() {
			return "D  " + p
		}
		return fmt.Sprintf("D  %s  (%s)", p, FmtSize(int64(c.OldSize)))
	}
	f := c.Flags()
	s := fmt.Sprintf("M  %s  [%s]", p, c.What)
	if f&snapshot.ChangedContent != 0 {
		s += fmt.Sprintf("  %s -> %s", FmtSize(int64(c.OldSize)), FmtSize(int64(c.NewSize)))
	}
	if f&snapshot.ChangedMode != 0 {
		s += fmt.Sprintf("  mode %04o -> %04o", c.OldMode, c.NewMode)
	}
	if f&snapshot.ChangedTarget != 0 {
		s += fmt.Sprintf("  -> %s (was %s)", c.NewTarget, c.OldTarget)
	}
	return s
}

// StatLine is the --stat form: " A path | before -> after".
func (c Change) StatLine() string {
	return fmt.Sprintf(" %c %s | %s -> %s", c.Letter(), c.Path, FmtSize(int64(c.OldSize)), FmtSize(int64(c.NewSize)))
}

// Summary counts a diff's changes of files and other non-directories
// (a path that changed between a directory and a file counts as modified).
type Summary struct {
	Added    int   `json:"added"`
	Modified int   `json:"modified"`
	Deleted  int   `json:"deleted"`
	Grown    int64 `json:"bytes_added"`   // sum of size increases
	Shrunk   int64 `json:"bytes_removed"` // sum of size decreases
}

// Add counts c (changes of directories only are not counted).
func (s *Summary) Add(c Change) {
	if c.DirOnly() {
		return
	}
	switch c.Letter() {
	case 'A':
		s.Added++
	case 'M':
		s.Modified++
	case 'D':
		s.Deleted++
	}
	if c.NewSize > c.OldSize {
		s.Grown += int64(c.NewSize - c.OldSize)
	} else {
		s.Shrunk += int64(c.OldSize - c.NewSize)
	}
}

func (s Summary) String() string {
	return fmt.Sprintf("%d added, %d modified, %d deleted (+%s, -%s)", s.Added, s.Modified, s.Deleted, FmtSize(s.Grown), FmtSize(s.Shrunk))
}

// Patch returns the unified content diff of a file change read from r:
// "" when c involves no file content (directories, symlinks, attribute-only
// modifications), a one-line note for binary files and for files larger
// than maxBytes, the diff otherwise.
func Patch(ctx context.Context, r *snapshot.Repo, c snapshot.Change, maxBytes int64) (string, error) {
	read := func(e *snapshot.Entry) ([]byte, error) {
		if e == nil || e.Type != snapshot.TypeFile {
			return nil, nil
		}
		return r.ReadEntry(ctx, *e, maxBytes)
	}
	if e := c.Entry(); e.Type != snapshot.TypeFile && (c.Old == nil || c.Old.Type != snapshot.TypeFile) {
		return "", nil
	}
	if c.Op == snapshot.Modified && c.What&(snapshot.ChangedContent|snapshot.ChangedType) == 0 {
		return "", nil
	}
	before, errA := read(c.Old)
	after, errB := read(c.New)
	if errors.Is(errA, snapshot.ErrTooLarge) || errors.Is(errB, snapshot.ErrTooLarge) {
		return fmt.Sprintf("(%s: larger than --max-bytes %s, content not shown)\n", c.Path, FmtSize(maxBytes)), nil
	}
	if err := errors.Join(errA, errB); err != nil {
		return "", err
	}
	if snapshot.IsBinary(before) || snapshot.IsBinary(after) {
		return fmt.Sprintf("Binary files a/%s and b/%s differ\n", c.Path, c.Path), nil
	}
	aName, bName := "a/"+c.Path, "b/"+c.Path
	if c.Old == nil || c.Old.Type != snapshot.TypeFile {
		aName = "/dev/null"
	}
	if c.New == nil || c.New.Type != snapshot.TypeFile {
		bName = "/dev/null"
	}
	return udiff.Unified(aName, bName, before, after, 3), nil
}

// Options select what Diff reports.
type Options struct {
	// Dir restricts the diff to a directory (slash-separated, relative to
	// the root; "" or "." for everything); paths stay relative to the root.
	Dir string
	// Patch fills Change.Patch for file changes, reading at most MaxBytes
	// of each side (default 4 MiB).
	Patch    bool
	MaxBytes int64
}

// Diff calls fn for every difference from a to b (see snapshot.Repo.Diff),
// flattened, in path order. Changes outside opts.Dir are computed and
// dropped; equal subtrees are skipped by hash either way, so the cost
// follows the size of the whole change, not of the tree.
func Diff(ctx context.Context, r *snapshot.Repo, a, b snapshot.TreeRoot, opts Options, fn func(Change) error) error {
	dir := strings.Trim(opts.Dir, "/")
	if dir == "." {
		dir = ""
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 4 << 20
	}
	return r.Diff(ctx, a, b, func(c snapshot.Change) error {
		if dir != "" && !strings.HasPrefix(c.Path, dir+"/") {
			return nil
		}
		out := FromSnapshot(c)
		if opts.Patch && !out.DirOnly() {
			p, err := Patch(ctx, r, c, opts.MaxBytes)
			if err != nil {
				return err
			}
			out.Patch = p
		}
		return fn(out)
	})
}

// FmtSize formats a byte count with a binary unit ("12 B", "4.0 MiB").
func FmtSize(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for (v >= 1024 || v <= -1024) && i < 4 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}
