package fs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

// TestVirtualModel drives random operations against a virtual mount and
// against a plain copy of its base (the model), and compares the two trees
// after every step (times aside), and the errors of every operation. Then
// it checks diff against the model (every difference is listed, nothing
// listed is not a difference), discards some paths and commits some, then
// all, checking the mount, the diff and the base each time. A host
// directory base is checked byte for byte, times included, until the
// first commit.
//
// AGENTFS_VIRTUAL_MODEL_SEED, _ROUNDS and _STEPS replay or extend it; a
// failure prints the seed and the operations so far.
func TestVirtualModel(t *testing.T) {
	rounds := envInt(t, "AGENTFS_VIRTUAL_MODEL_ROUNDS", 3)
	steps := envInt(t, "AGENTFS_VIRTUAL_MODEL_STEPS", 40)
	seed0 := int64(envInt(t, "AGENTFS_VIRTUAL_MODEL_SEED", int(time.Now().UnixNano()%1e9)))
	for _, kind := range []string{"host", "snapshot"} {
		t.Run(kind, func(t *testing.T) {
			for r := range rounds {
				seed := seed0 + int64(r)
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					mr := newModelRun(t, kind, seed)
					mr.run(steps)
				})
			}
		})
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// modelRun is one round of the model test.
type modelRun struct {
	t    *testing.T
	kind string // "host" or "snapshot"
	seed int64
	rng  *rand.Rand
	w    *fstest.Mount
	c    *control.Client
	m    string // the model: a plain directory
	base string // the base's contents as a plain directory (the host directory itself for "host")
	url  string // the store
	// pristine is the host directory's manifest before anything ran.
	pristine posixtest.Manifest
	log      []string
	failed   int // operations that failed (alike) on both
}

const timesIgnored = posixtest.IgnoreAtime | posixtest.IgnoreMtime | posixtest.IgnoreCtime

func newModelRun(t *testing.T, kind string, seed int64) *modelRun {
	mr := &modelRun{t: t, kind: kind, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 7))}
	tmp := t.TempDir()
	mr.base = filepath.Join(tmp, "base")
	mr.m = filepath.Join(tmp, "model")
	makeModelBase(t, mr.base, mr.rng)
	cpTree(t, mr.base, mr.m)
	switch kind {
	case "host":
		mr.pristine = manifestOf(t, mr.base)
		mr.w = fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", mr.base}})
		mr.url = mr.w.URL
	case "snapshot":
		plain := fstest.Start(t, fstest.Options{})
		cpTree(t, mr.base+"/.", plain.Dir)
		plain.Unmount(t)
		if out, err := plain.Agentfs("snapshot", "save", plain.URL, "base"); err != nil {
			t.Fatalf("snapshot save: %v\n%s", err, out)
		}
		mr.url = plain.URL
		mr.w = fstest.Start(t, fstest.Options{URL: plain.URL, Dir: filepath.Join(tmp, "virtual"),
			Args: []string{"--virtual", "--base", "snapshot:base"}})
	}
	mr.c = virtualClient(t, mr.w)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (AGENTFS_VIRTUAL_MODEL_SEED=%d replays it), operations:\n%s", seed, seed, strings.Join(mr.log, "\n"))
		}
	})
	return mr
}

// makeModelBase writes the base tree: text files, a 5 MiB file (so that
// one-byte edits copy up one chunk), an executable, nested and empty
// directories, symlinks (one dangling) and an xattr.
func makeModelBase(t *testing.T, dir string, rng *rand.Rand) {
	t.Helper()
	files := map[string]string{
		"a.txt": "alpha\nbeta\ngamma\n", "b.txt": "bee\n", "exec.sh": "#!/bin/sh\necho hi\n",
		"src/main.go": "package main\n\nfunc main() {}\n", "src/util.go": "package main\n\nfunc util() {}\n",
		"src/deep/x.txt": "x\n", "src/deep/y.txt": "y\ny\n", "src/deep/deeper/z.txt": "z\n",
		"docs/readme.md": "# readme\n\ntext\n",
	}
	for p, data := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 5<<20+123)
	for i := range big {
		big[i] = byte(rng.IntN(256))
	}
	must(t, os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
	must(t, os.Chmod(filepath.Join(dir, "exec.sh"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "docs", "empty"), 0o755))
	must(t, os.Symlink("src/main.go", filepath.Join(dir, "link")))
	must(t, os.Symlink("nowhere", filepath.Join(dir, "dangling")))
	must(t, unix.Setxattr(filepath.Join(dir, "a.txt"), "user.tag", []byte("a"), 0))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// cpTree copies src to dst with cp -a (modes, owners, times, xattrs,
// links).
func cpTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}

// modelOp is one operation, applied alike to the mount and the model.
type modelOp struct {
	kind string
	a, b string // paths relative to the root (b: a rename's or link's target, a symlink's name)
	data []byte
	off  int64
	mode uint32
}

func (o modelOp) String() string {
	switch o.kind {
	case "write", "append", "setxattr":
		return fmt.Sprintf("%s %s %q", o.kind, o.a, o.data)
	case "pwrite":
		return fmt.Sprintf("pwrite %s @%d %q", o.a, o.off, o.data)
	case "truncate":
		return fmt.Sprintf("truncate %s %d", o.a, o.off)
	case "chmod":
		return fmt.Sprintf("chmod %s %o", o.a, o.mode)
	case "rename", "link", "symlink", "replace":
		return fmt.Sprintf("%s %s %s", o.kind, o.a, o.b)
	}
	return o.kind + " " + o.a
}

// apply runs o below root and returns its error (an errno or nil).
func (o modelOp) apply(root string) error {
	p := filepath.Join(root, o.a)
	q := filepath.Join(root, o.b)
	writeAt := func(flags int, off int64) error {
		fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		defer func() { _ = unix.Close(fd) }()
		if off >= 0 {
			_, err = unix.Pwrite(fd, o.data, off)
		} else {
			_, err = unix.Write(fd, o.data)
		}
		return err
	}
	switch o.kind {
	case "write":
		return writeAt(unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, -1)
	case "append":
		return writeAt(unix.O_WRONLY|unix.O_APPEND, -1)
	case "pwrite":
		return writeAt(unix.O_WRONLY, o.off)
	case "truncate":
		return unix.Truncate(p, o.off)
	case "mkdir":
		return unix.Mkdir(p, 0o755)
	case "rmdir":
		return unix.Rmdir(p)
	case "unlink":
		return unix.Unlink(p)
	case "rename":
		return unix.Rename(p, q)
	case "chmod":
		return unix.Chmod(p, o.mode)
	case "symlink":
		return unix.Symlink(o.a, q)
	case "link":
		return unix.Link(p, q)
	case "setxattr":
		return unix.Lsetxattr(p, "user.k", o.data, 0)
	case "removexattr":
		return unix.Lremovexattr(p, "user.k")
	case "replace":
		// What sed -i and many editors do: write a new file, rename it over.
		tmp := filepath.Join(filepath.Dir(p), ".tmp~")
		if err := os.WriteFile(tmp, o.data, 0o644); err != nil {
			return errnoOf(err)
		}
		return unix.Rename(tmp, p)
	}
	panic("unknown op " + o.kind)
}

// errnoOf reduces err to its errno, if it has one.
func errnoOf(err error) error {
	var en unix.Errno
	if errors.As(err, &en) {
		return en
	}
	return err
}

// paths lists the model's paths below its root, and its directories.
func (mr *modelRun) paths() (all, dirs []string) {
	dirs = []string{""}
	err := filepath.WalkDir(mr.m, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == mr.m {
			return err
		}
		rel, _ := filepath.Rel(mr.m, p)
		all = append(all, rel)
		if d.IsDir() {
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		mr.t.Fatal(err)
	}
	return all, dirs
}

var modelNames = []string{"n0", "n1", "n2", "a.txt", "main.go", "x.txt", "deep"}

// randomOp picks an operation on the model's current paths.
func (mr *modelRun) randomOp() modelOp {
	r := mr.rng
	all, dirs := mr.paths()
	existing := func() string {
		if len(all) == 0 || r.IntN(10) == 0 {
			return mr.fresh(dirs)
		}
		return all[r.IntN(len(all))]
	}
	text := func() []byte {
		var b strings.Builder
		for range 1 + r.IntN(4) {
			fmt.Fprintf(&b, "line %d\n", r.IntN(5))
		}
		return []byte(b.String())
	}
	kinds := []string{"write", "write", "append", "pwrite", "truncate", "mkdir", "mkdir", "rmdir", "unlink", "unlink",
		"rename", "rename", "rename", "chmod", "symlink", "link", "setxattr", "removexattr", "replace"}
	o := modelOp{kind: kinds[r.IntN(len(kinds))]}
	switch o.kind {
	case "write", "replace":
		o.a, o.data = existing(), text()
		if r.IntN(3) == 0 {
			o.a = mr.fresh(dirs)
		}
	case "append":
		o.a, o.data = existing(), text()
	case "pwrite":
		o.a, o.data = existing(), []byte{byte('A' + r.IntN(26))}
		if r.IntN(2) == 0 {
			o.a = "big.bin"
		}
		o.off = int64(r.IntN(64))
		if o.a == "big.bin" {
			o.off = int64(r.IntN(6 << 20))
		}
	case "truncate":
		o.a, o.off = existing(), int64(r.IntN(20))
	case "mkdir":
		o.a = mr.fresh(dirs)
	case "rmdir":
		o.a = dirs[r.IntN(len(dirs))]
		if o.a == "" {
			o.a = existing()
		}
	case "unlink", "removexattr":
		o.a = existing()
	case "rename":
		o.a = existing()
		if r.IntN(3) == 0 {
			o.b = existing()
		} else {
			o.b = mr.fresh(dirs)
		}
	case "chmod":
		o.a, o.mode = existing(), []uint32{0o600, 0o644, 0o755, 0o700}[r.IntN(4)]
	case "symlink":
		o.a, o.b = existing(), mr.fresh(dirs)
	case "link":
		o.a, o.b = existing(), mr.fresh(dirs)
	case "setxattr":
		o.a, o.data = existing(), []byte(fmt.Sprint(r.IntN(3)))
	}
	return o
}

// fresh is a name in a random directory (it may exist).
func (mr *modelRun) fresh(dirs []string) string {
	d := dirs[mr.rng.IntN(len(dirs))]
	return filepath.Join(d, modelNames[mr.rng.IntN(len(modelNames))])
}

// step applies one operation to both trees and compares them.
func (mr *modelRun) step(o modelOp) {
	t := mr.t
	t.Helper()
	mr.log = append(mr.log, o.String())
	errM := errnoOf(o.apply(mr.m))
	errW := errnoOf(o.apply(mr.w.Dir))
	if !errors.Is(errW, errM) && (errW != nil || errM != nil) {
		t.Fatalf("%s: the mount says %v, the model %v", o, errW, errM)
	}
	if errM != nil {
		mr.failed++
		mr.log[len(mr.log)-1] += fmt.Sprintf(" (%v)", errM)
	}
	mr.compare("after " + o.String())
}

// compare fails the test if the mount and the model differ (times aside,
// and more when told).
func (mr *modelRun) compare(when string, ignore ...posixtest.Ignore) {
	t := mr.t
	t.Helper()
	d := posixtest.Diff(manifestOf(t, mr.m), manifestOf(t, mr.w.Dir), append(ignore, timesIgnored)...)
	if len(d) > 0 {
		t.Fatalf("%s: the mount differs from the model (%d differences):\n%s", when, len(d), strings.Join(d[:min(len(d), 30)], "\n"))
	}
}

// diff returns the mount's changes.
func (mr *modelRun) diff() []overlay.Change {
	rep, err := mr.c.VirtualDiff(context.Background(), control.VirtualDiffRequest{})
	if err != nil {
		mr.t.Fatal(err)
	}
	var out []overlay.Change
	for _, c := range rep.Changes {
		out = append(out, c.Change)
	}
	return out
}

func (mr *modelRun) run(steps int) {
	t := mr.t
	mr.compare("at the start")
	for range steps {
		mr.step(mr.randomOp())
	}
	mr.checkHostUntouched()
	base := manifestOf(t, mr.base)
	changes := mr.diff()
	mr.checkDiff("after the operations", changes, base, manifestOf(t, mr.m))
	defer func() {
		t.Logf("%d operations (%d failed alike), %d changes: %s", steps, mr.failed, len(changes), strings.Join(mr.log[steps:], "; "))
	}()

	// Discard some changes: those paths show the base again at once.
	if picked := mr.pickSimple(changes, false); len(picked) > 0 {
		mr.log = append(mr.log, "discard "+strings.Join(picked, " "))
		if _, err := mr.c.Discard(context.Background(), control.DiscardRequest{Paths: picked}); err != nil {
			t.Fatalf("discard %v: %v", picked, err)
		}
		for _, p := range picked {
			mr.resetPath(mr.m, mr.base, p)
		}
		mr.compare(fmt.Sprintf("after discarding %v", picked))
		changes = mr.diff()
		for _, c := range changes {
			for _, p := range picked {
				if c.Path == p || strings.HasPrefix(c.Path, p+"/") {
					t.Fatalf("after discarding %s, diff still lists %s", p, c)
				}
			}
		}
		mr.checkDiff("after the discard", changes, base, manifestOf(t, mr.m))
		mr.checkHostUntouched()
	}

	// Commit some changes, then the rest.
	expected := filepath.Join(t.TempDir(), "expected")
	cpTree(t, mr.base, expected)
	if picked := mr.pickSimple(changes, true); len(picked) > 0 {
		mr.log = append(mr.log, "commit "+strings.Join(picked, " "))
		res, err := mr.c.Commit(context.Background(), control.CommitRequest{Paths: picked, Message: "some"})
		switch {
		case errors.Is(err, overlay.ErrEntangled):
			// A pending change reads what those paths change on the host:
			// refused, as documented; the host must be untouched.
			mr.log[len(mr.log)-1] += " (refused: entangled)"
			mr.checkHostUntouched()
			picked = nil
		case err != nil:
			t.Fatalf("commit %v: %v", picked, err)
		}
		for _, p := range picked {
			mr.resetPath(expected, mr.m, p)
		}
		if picked != nil {
			mr.checkBase("after committing "+strings.Join(picked, " "), expected)
			mr.compare("after a partial commit", posixtest.IgnoreNlink)
			after := mr.diff()
			if len(after) != res.Pending {
				t.Errorf("commit reported %d pending changes; diff lists %d", res.Pending, len(after))
			}
			mr.checkDiff("after a partial commit", after, manifestOf(t, expected), manifestOf(t, mr.m))
		}
	}
	mr.log = append(mr.log, "commit")
	if _, err := mr.c.Commit(context.Background(), control.CommitRequest{Message: "all"}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	mr.checkBase("after committing everything", mr.m)
	if left := mr.diff(); len(left) > 0 {
		t.Fatalf("diff after committing everything: %v", left)
	}
	mr.compare("after committing everything", posixtest.IgnoreNlink)
}

// checkHostUntouched fails unless the host directory base is exactly as
// it was (times included).
func (mr *modelRun) checkHostUntouched() {
	if mr.kind == "host" {
		wantSame(mr.t, "the host directory changed before any commit", mr.pristine, manifestOf(mr.t, mr.base))
	}
}

// checkBase compares the base after a commit with the tree want. A host
// directory has no hard links after a commit (each name is written as its
// own file); a snapshot base is read back through a read-only mount of its
// branch.
func (mr *modelRun) checkBase(when, want string) {
	t := mr.t
	t.Helper()
	got := mr.base
	if mr.kind == "snapshot" {
		ro := fstest.Start(t, fstest.Options{URL: mr.url, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "ro")})
		defer ro.Unmount(t)
		got = ro.Dir
	}
	if d := posixtest.Diff(manifestOf(t, want), manifestOf(t, got), timesIgnored, posixtest.IgnoreNlink); len(d) > 0 {
		t.Fatalf("%s: the base differs from what was committed (%d differences):\n%s", when, len(d), strings.Join(d[:min(len(d), 30)], "\n"))
	}
}

// resetPath makes dst/p what src/p is (gone if src has none). Missing
// parent directories are made with src's permissions and xattrs, empty
// but for p.
func (mr *modelRun) resetPath(dst, src, p string) {
	t := mr.t
	must(t, os.RemoveAll(filepath.Join(dst, p)))
	if _, err := os.Lstat(filepath.Join(src, p)); err != nil {
		return
	}
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		d := filepath.Join(parts[:i]...)
		if _, err := os.Lstat(filepath.Join(dst, d)); err == nil {
			continue
		}
		st, err := os.Stat(filepath.Join(src, d))
		must(t, err)
		must(t, os.Mkdir(filepath.Join(dst, d), 0o755))
		must(t, os.Chmod(filepath.Join(dst, d), st.Mode().Perm()))
		buf := make([]byte, 4096)
		n, err := unix.Llistxattr(filepath.Join(src, d), buf)
		must(t, err)
		for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
			if name == "" {
				continue
			}
			val := make([]byte, 4096)
			vn, err := unix.Lgetxattr(filepath.Join(src, d), name, val)
			must(t, err)
			must(t, unix.Lsetxattr(filepath.Join(dst, d), name, val[:vn], 0))
		}
	}
	cpTree(t, filepath.Join(src, p), filepath.Join(dst, p))
}

// pickSimple picks up to two changed paths whose discard or commit the
// model can follow by copying: no rename is involved at or below them, and
// (for commits) no directory above them is new or renamed.
func (mr *modelRun) pickSimple(changes []overlay.Change, forCommit bool) []string {
	var cands []string
	for _, c := range changes {
		ok := c.Op != overlay.Renamed && c.From == ""
		for _, d := range changes {
			under := func(p string) bool { return p == c.Path || strings.HasPrefix(p, c.Path+"/") }
			if d.Op == overlay.Renamed && (under(d.Path) || under(d.From)) {
				ok = false
			}
			if forCommit && strings.HasPrefix(c.Path, d.Path+"/") && (d.Op == overlay.Added || d.Op == overlay.Renamed) {
				ok = false
			}
			if d.Op == overlay.Modified && d.Type != snapshot.TypeDir && strings.HasPrefix(c.Path, d.Path+"/") {
				// Below what is no longer a directory: that path goes first.
				ok = false
			}
		}
		if ok {
			cands = append(cands, c.Path)
		}
	}
	var out []string
	for range min(2, len(cands)) {
		p := cands[mr.rng.IntN(len(cands))]
		nested := false
		for _, q := range out {
			if p == q || strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
				nested = true
			}
		}
		if !nested {
			out = append(out, p)
		}
	}
	return out
}

// checkDiff checks changes against the model: each change is real, and
// every difference between base and cur (times and link counts aside) is
// listed, or implied by a listed change of a directory above it.
func (mr *modelRun) checkDiff(when string, changes []overlay.Change, base, cur posixtest.Manifest) {
	t := mr.t
	t.Helper()
	var renamedDirs []overlay.Change
	at := map[string][]overlay.Change{}
	for _, c := range changes {
		at[c.Path] = append(at[c.Path], c)
		if c.Op == overlay.Renamed && c.Type == snapshot.TypeDir {
			renamedDirs = append(renamedDirs, c)
		}
	}
	move := func(p string, from, to func(overlay.Change) string) string {
		best := -1
		for i, d := range renamedDirs {
			if f := from(d); strings.HasPrefix(p, f+"/") && (best < 0 || len(f) > len(from(renamedDirs[best]))) {
				best = i
			}
		}
		if best < 0 {
			return p
		}
		return to(renamedDirs[best]) + p[len(from(renamedDirs[best])):]
	}
	path := func(c overlay.Change) string { return c.Path }
	from := func(c overlay.Change) string { return c.From }
	toBase := func(p string) string { return move(p, path, from) }
	toLive := func(p string) string { return move(p, from, path) }
	// renamedAway reports whether base path q, or a directory above it,
	// is the source of a rename.
	renamedAway := func(q string) bool {
		for _, c := range changes {
			if c.Op == overlay.Renamed && (q == c.From || strings.HasPrefix(q, c.From+"/")) {
				return true
			}
		}
		return false
	}
	var errs []string
	fail := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	for _, c := range changes {
		_, inCur := cur[c.Path]
		bp := c.From
		if bp == "" {
			bp = toBase(c.Path)
		}
		_, inBase := base[bp]
		switch c.Op {
		case overlay.Added:
			// In the place of a base entry that was renamed away, a new
			// entry is an addition too.
			if !inCur || inBase && !renamedAway(bp) {
				fail("%s: but the workspace has it: %v, the base has %s: %v", c, inCur, bp, inBase)
			}
		case overlay.Deleted:
			if inCur || !inBase {
				fail("%s: but the workspace has it: %v, the base has %s: %v", c, inCur, bp, inBase)
			}
		case overlay.Modified:
			if !inCur || !inBase {
				fail("%s: but the workspace has it: %v, the base has %s: %v", c, inCur, bp, inBase)
			}
		case overlay.Renamed:
			if !inCur || !inBase || toBase(c.Path) == c.From {
				fail("%s: but the workspace has it: %v, the base has it: %v", c, inCur, inBase)
			}
		}
	}
	// aboveChanged reports whether a directory above p has a change that
	// covers what lies below it.
	aboveChanged := func(p string, ops ...overlay.ChangeOp) bool {
		for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
			for _, c := range at[d] {
				if slices.Contains(ops, c.Op) || (c.Op == overlay.Modified && c.Type != snapshot.TypeDir) {
					return true
				}
			}
		}
		return false
	}
	for _, p := range cur.Paths() {
		if p == "." {
			continue
		}
		cs := at[p]
		bp := toBase(p)
		b, inBase := base[bp]
		if len(cs) > 0 {
			if !inBase && !slices.ContainsFunc(cs, func(c overlay.Change) bool { return c.Op == overlay.Added || c.Op == overlay.Renamed }) {
				fail("%s is new in the workspace; diff says %v", p, cs)
			}
			continue
		}
		switch {
		case !inBase && !aboveChanged(p, overlay.Added):
			fail("%s is in the workspace, not in the base (at %s), and diff does not list it", p, bp)
		case inBase && !sameContent(b, cur[p]):
			fail("%s differs from the base's %s and diff does not list it: %+v vs %+v", p, bp, cur[p], b)
		}
	}
	for _, q := range base.Paths() {
		if q == "." {
			continue
		}
		lq := toLive(q)
		if _, ok := cur[lq]; ok {
			continue
		}
		explained := aboveChanged(lq, overlay.Deleted)
		for _, c := range changes {
			if (c.Op == overlay.Deleted && (c.Path == lq || c.From == q)) || (c.Op == overlay.Renamed && c.From == q) {
				explained = true
			}
		}
		if !explained {
			fail("%s of the base is gone from the workspace (from %s) and diff does not say so", q, lq)
		}
	}
	if len(errs) > 0 {
		var list []string
		for _, c := range changes {
			list = append(list, c.String())
		}
		t.Fatalf("%s: diff disagrees with the model:\n%s\ndiff:\n%s", when, strings.Join(errs, "\n"), strings.Join(list, "\n"))
	}
}

// sameContent compares two manifest entries, times and link counts aside.
func sameContent(a, b posixtest.Entry) bool {
	return a.Type == b.Type && a.Perm == b.Perm && a.UID == b.UID && a.GID == b.GID && a.Size == b.Size &&
		a.SHA256 == b.SHA256 && a.Target == b.Target && a.Rdev == b.Rdev && fmt.Sprint(a.Xattrs) == fmt.Sprint(b.Xattrs)
}
