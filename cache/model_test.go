package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/snapshot"
)

// The model-based test drives random sequences of namespace and data
// operations against the engine and against a simple in-memory model, and
// compares the two after every step. Syncs, reopenings of the same cache
// directory, and reopenings from a fresh cache directory (another machine)
// are operations too, so every state is also checked after a round trip
// through the blob store.

type mfile struct {
	typ    snapshot.EntryType
	mode   uint32
	data   []byte
	target string
	xattrs map[string]string
	kids   map[string]*mfile // directories
}

type model struct{ root *mfile }

func newMDir() *mfile {
	return &mfile{typ: snapshot.TypeDir, mode: 0o755, kids: map[string]*mfile{}, xattrs: map[string]string{}}
}

// resolve returns the node at p ("" is the root) and its parent.
func (m *model) resolve(p string) (*mfile, *mfile) {
	if p == "" {
		return m.root, nil
	}
	cur, parent := m.root, (*mfile)(nil)
	for _, part := range strings.Split(p, "/") {
		if cur == nil || cur.typ != snapshot.TypeDir {
			return nil, nil
		}
		parent, cur = cur, cur.kids[part]
	}
	return cur, parent
}

// paths lists every path of the model (depth-first, sorted), with the root "".
func (m *model) paths() []string {
	var out []string
	var walk func(prefix string, d *mfile)
	walk = func(prefix string, d *mfile) {
		names := make([]string, 0, len(d.kids))
		for n := range d.kids {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := path.Join(prefix, n)
			out = append(out, p)
			if d.kids[n].typ == snapshot.TypeDir {
				walk(p, d.kids[n])
			}
		}
	}
	out = append(out, "")
	walk("", m.root)
	return out
}

func (m *model) linkCount(f *mfile) int {
	n := 0
	var walk func(d *mfile)
	walk = func(d *mfile) {
		for _, k := range d.kids {
			if k == f {
				n++
			}
			if k.typ == snapshot.TypeDir {
				walk(k)
			}
		}
	}
	walk(m.root)
	return n
}

func isUnder(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

type harness struct {
	t    *testing.T
	url  string
	dir  string
	v    *Volume
	r    *Volume // a read-only follower, moved to the head after each sync
	m    *model
	ctx  context.Context
	pins []pinned // files of v pinned for passthrough, held open across steps
}

// pinned is a file pinned for passthrough (Volume.PinLocal): the open
// inode, its model file and the descriptor of its data file that the
// kernel would read.
type pinned struct {
	ino uint64
	f   *mfile
	fd  *os.File
}

// pin opens the file at p, reads it whole (which makes every block local)
// and pins it; an inline file does not pin (nothing is kept).
func (h *harness) pin(rt *rapid.T, p string) {
	mf, _ := h.m.resolve(p)
	a, _ := h.lookupPath(p)
	if _, err := h.v.Open(h.ctx, a.Ino, false); err != nil {
		rt.Fatalf("open %s: %v", p, err)
	}
	buf := make([]byte, len(mf.data)+1)
	n, err := h.v.Read(h.ctx, a.Ino, buf, 0)
	if err != nil || !bytes.Equal(buf[:n], mf.data) {
		rt.Fatalf("read %s before pinning: %d bytes, %v; want the model's %d", p, n, err, len(mf.data))
	}
	fd, _, err := h.v.PinLocal(a.Ino, false, false)
	if err != nil || fd == nil {
		_ = h.v.Release(h.ctx, a.Ino)
		if err != nil {
			rt.Fatalf("pin %s: %v", p, err)
		}
		return
	}
	h.pins = append(h.pins, pinned{ino: a.Ino, f: mf, fd: fd})
}

// unpin undoes pin i.
func (h *harness) unpin(rt *rapid.T, i int) {
	pn := h.pins[i]
	h.pins = slices.Delete(h.pins, i, i+1)
	h.v.Unpin(pn.ino)
	_ = pn.fd.Close()
	if err := h.v.Release(h.ctx, pn.ino); err != nil {
		rt.Fatalf("release pinned inode %d: %v", pn.ino, err)
	}
}

// checkPins checks what the kernel would read through each pinned data
// file: the file's whole content, at its size (an unlinked file keeps its
// last content).
func (h *harness) checkPins(rt *rapid.T) {
	for _, pn := range h.pins {
		st, err := pn.fd.Stat()
		if err != nil {
			rt.Fatal(err)
		}
		got := make([]byte, st.Size())
		if _, err := pn.fd.ReadAt(got, 0); err != nil && !errors.Is(err, io.EOF) {
			rt.Fatal(err)
		}
		if !bytes.Equal(got, pn.f.data) {
			rt.Fatalf("pinned inode %d: its data file holds %d bytes that differ from the model's %d", pn.ino, len(got), len(pn.f.data))
		}
	}
}

func (h *harness) lookupPath(p string) (Attr, error) { return lookupIn(h.ctx, h.v, p) }

func lookupIn(ctx context.Context, v *Volume, p string) (Attr, error) {
	a, err := v.GetAttr(ctx, RootIno)
	if err != nil || p == "" {
		return a, err
	}
	for _, part := range strings.Split(p, "/") {
		if a, err = v.Lookup(ctx, a.Ino, part); err != nil {
			return a, err
		}
	}
	return a, nil
}

func (h *harness) parentIno(p string) uint64 {
	dir := path.Dir(p)
	if dir == "." {
		dir = ""
	}
	a, err := h.lookupPath(dir)
	if err != nil {
		h.t.Fatalf("parent of %s: %v", p, err)
	}
	return a.Ino
}

// check compares the whole engine namespace with the model.
func (h *harness) check(rt *rapid.T) { h.checkVol(rt, h.v) }

func (h *harness) checkVol(rt *rapid.T, v *Volume) {
	if err := v.checkInvariants(); err != nil {
		rt.Fatal(err)
	}
	inoOf := map[*mfile]uint64{}
	for _, p := range h.m.paths() {
		mf, _ := h.m.resolve(p)
		a, err := lookupIn(h.ctx, v, p)
		if err != nil {
			rt.Fatalf("lookup %q: %v", p, err)
		}
		if a.Type != mf.typ {
			rt.Fatalf("%q: type %v, want %v", p, a.Type, mf.typ)
		}
		if a.Mode != mf.mode {
			rt.Fatalf("%q: mode %o, want %o", p, a.Mode, mf.mode)
		}
		if ino, ok := inoOf[mf]; ok && ino != a.Ino {
			rt.Fatalf("%q: hard link has inode %d, want %d", p, a.Ino, ino)
		}
		inoOf[mf] = a.Ino
		switch mf.typ {
		case snapshot.TypeFile:
			if a.Size != uint64(len(mf.data)) {
				rt.Fatalf("%q: size %d, want %d", p, a.Size, len(mf.data))
			}
			if got := readFile(h.t, v, a.Ino); !bytes.Equal(got, mf.data) {
				rt.Fatalf("%q: content differs (len %d vs %d)", p, len(got), len(mf.data))
			}
			if n := h.m.linkCount(mf); a.Nlink != uint32(n) {
				rt.Fatalf("%q: nlink %d, want %d", p, a.Nlink, n)
			}
		case snapshot.TypeSymlink:
			if tg, err := v.Readlink(h.ctx, a.Ino); err != nil || tg != mf.target {
				rt.Fatalf("%q: readlink %q %v, want %q", p, tg, err, mf.target)
			}
		case snapshot.TypeDir:
			ents, err := v.ReadDir(h.ctx, a.Ino)
			if err != nil {
				rt.Fatalf("readdir %q: %v", p, err)
			}
			var got, want []string
			subdirs := 0
			for _, e := range ents {
				got = append(got, e.Name)
			}
			for n, k := range mf.kids {
				want = append(want, n)
				if k.typ == snapshot.TypeDir {
					subdirs++
				}
			}
			sort.Strings(want)
			if !slices.Equal(got, want) {
				rt.Fatalf("readdir %q = %v, want %v", p, got, want)
			}
			if a.Nlink != uint32(2+subdirs) {
				rt.Fatalf("%q: dir nlink %d, want %d", p, a.Nlink, 2+subdirs)
			}
		}
		names, err := v.ListXattr(h.ctx, a.Ino)
		if err != nil {
			rt.Fatalf("listxattr %q: %v", p, err)
		}
		if len(names) != len(mf.xattrs) {
			rt.Fatalf("%q: xattrs %v, want %v", p, names, mf.xattrs)
		}
		for _, n := range names {
			val, err := v.GetXattr(h.ctx, a.Ino, n)
			if err != nil || string(val) != mf.xattrs[n] {
				rt.Fatalf("%q: xattr %s = %q %v, want %q", p, n, val, err, mf.xattrs[n])
			}
		}
	}
}

func (h *harness) reopen(rt *rapid.T, fresh bool) {
	for len(h.pins) > 0 {
		h.unpin(rt, 0)
	}
	if err := h.v.Close(h.ctx); err != nil {
		h.t.Fatalf("close: %v", err)
	}
	if fresh {
		h.dir = h.t.TempDir()
	}
	h.v = openVolume(h.t, h.url, h.dir)
}

// TestModel runs the model on every store: mem:// and file:// always, S3 on
// a real MinIO server (fewer runs: each costs network round trips).
func TestModel(t *testing.T) {
	t.Run("mem", func(t *testing.T) { runModel(t, 30, func() string { return testStoreURL(t) }) })
	t.Run("mem-encrypted", func(t *testing.T) { runModel(t, 30, func() string { return testStoreURL(t) }, encrypted) })
	t.Run("file", func(t *testing.T) { runModel(t, 20, func() string { return "file://" + t.TempDir() }) })
	t.Run("s3", func(t *testing.T) {
		base := testservices.StartMinIO(t)
		n := 0
		runModel(t, 20, func() string {
			n++
			return urlWithPrefix(base, fmt.Sprintf("model-%d", n))
		})
	})
}

// urlWithPrefix adds a key prefix to a store URL that may have a query.
func urlWithPrefix(base, prefix string) string {
	u, q, _ := strings.Cut(base, "?")
	return strings.TrimSuffix(u, "/") + "/" + prefix + "?" + q
}

func runModel(t *testing.T, checks int, newURL func() string, cfg ...func(*snapshot.Config)) {
	setRapidChecks(t, checks)
	rapid.Check(t, func(rt *rapid.T) {
		url := newURL()
		initVolume(t, url, append([]func(*snapshot.Config){func(c *snapshot.Config) { c.ChunkSize = 4096; c.PackSize = 1 << 20 }}, cfg...)...)
		h := &harness{t: t, url: url, dir: t.TempDir(), m: &model{root: newMDir()}, ctx: context.Background()}
		h.v = openVolume(t, url, h.dir)
		h.r = openVolume(t, url, "", func(o *Options) { o.ReadOnly = true; o.FollowInterval = -1 })
		names := rapid.SampledFrom([]string{"a", "b", "c", "d.txt", "e"})
		anyPath := func(rt *rapid.T, label string) string {
			ps := h.m.paths()[1:]
			if len(ps) == 0 {
				rt.Skip("empty tree")
			}
			return rapid.SampledFrom(ps).Draw(rt, label)
		}
		dirPath := func(rt *rapid.T, label string) string {
			var ds []string
			for _, p := range h.m.paths() {
				if f, _ := h.m.resolve(p); f.typ == snapshot.TypeDir {
					ds = append(ds, p)
				}
			}
			return rapid.SampledFrom(ds).Draw(rt, label)
		}
		filePath := func(rt *rapid.T) string {
			var fs []string
			for _, p := range h.m.paths() {
				if f, _ := h.m.resolve(p); f != nil && f.typ == snapshot.TypeFile {
					fs = append(fs, p)
				}
			}
			if len(fs) == 0 {
				rt.Skip("no files")
			}
			return rapid.SampledFrom(fs).Draw(rt, "file")
		}
		content := func(rt *rapid.T, label string) []byte {
			n := rapid.SampledFrom([]int{0, 1, 100, 4095, 4096, 4097, 10000, 20000}).Draw(rt, label+"-len")
			b := byte(rapid.IntRange(0, 255).Draw(rt, label+"-byte"))
			out := bytes.Repeat([]byte{b}, n)
			if n > 0 && rapid.Bool().Draw(rt, label+"-zeros") {
				clear(out[:n/2])
			}
			return out
		}
		expectErr := func(rt *rapid.T, op string, err error, want error) {
			if want == nil && err != nil {
				rt.Fatalf("%s: %v", op, err)
			}
			if want != nil && !errors.Is(err, want) {
				rt.Fatalf("%s: err = %v, want %v", op, err, want)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"": func(rt *rapid.T) { h.check(rt); h.checkPins(rt) },
			"create": func(rt *rapid.T) {
				dir := dirPath(rt, "dir")
				name := names.Draw(rt, "name")
				data := content(rt, "data")
				p := path.Join(dir, name)
				d, _ := h.m.resolve(dir)
				parent, _ := h.lookupPath(dir)
				a, err := h.v.Create(h.ctx, parent.Ino, name, 0o644, Cred{}, true, false)
				if d.kids[name] != nil {
					expectErr(rt, "create "+p, err, ErrExists)
					return
				}
				expectErr(rt, "create "+p, err, nil)
				if len(data) > 0 {
					if _, err := h.v.Write(h.ctx, a.Ino, data, 0); err != nil {
						rt.Fatalf("write: %v", err)
					}
				}
				_ = h.v.Release(h.ctx, a.Ino)
				d.kids[name] = &mfile{typ: snapshot.TypeFile, mode: 0o644, data: data, xattrs: map[string]string{}}
			},
			"write": func(rt *rapid.T) {
				p := filePath(rt)
				f, _ := h.m.resolve(p)
				off := rapid.IntRange(0, len(f.data)+5000).Draw(rt, "off")
				data := content(rt, "wdata")
				a, _ := h.lookupPath(p)
				if _, err := h.v.Open(h.ctx, a.Ino, false); err != nil {
					rt.Fatal(err)
				}
				_, err := h.v.Write(h.ctx, a.Ino, data, uint64(off))
				_ = h.v.Release(h.ctx, a.Ino)
				expectErr(rt, "write "+p, err, nil)
				if len(data) == 0 {
					return
				}
				if need := off + len(data); need > len(f.data) {
					f.data = append(f.data, make([]byte, need-len(f.data))...)
				}
				copy(f.data[off:], data)
			},
			"truncate": func(rt *rapid.T) {
				p := filePath(rt)
				f, _ := h.m.resolve(p)
				size := rapid.IntRange(0, len(f.data)+9000).Draw(rt, "size")
				a, _ := h.lookupPath(p)
				sz := uint64(size)
				_, err := h.v.SetAttr(h.ctx, a.Ino, SetAttrIn{Size: &sz})
				expectErr(rt, "truncate "+p, err, nil)
				if size <= len(f.data) {
					f.data = f.data[:size]
				} else {
					f.data = append(f.data, make([]byte, size-len(f.data))...)
				}
			},
			"mkdir": func(rt *rapid.T) {
				dir := dirPath(rt, "dir")
				name := names.Draw(rt, "name")
				d, _ := h.m.resolve(dir)
				parent, _ := h.lookupPath(dir)
				_, err := h.v.Mkdir(h.ctx, parent.Ino, name, 0o750, Cred{})
				if d.kids[name] != nil {
					expectErr(rt, "mkdir", err, ErrExists)
					return
				}
				expectErr(rt, "mkdir", err, nil)
				nd := newMDir()
				nd.mode = 0o750
				if d.mode&ModeSetgid != 0 {
					nd.mode |= ModeSetgid // inherited, as on ext4
				}
				d.kids[name] = nd
			},
			"symlink": func(rt *rapid.T) {
				dir := dirPath(rt, "dir")
				name := names.Draw(rt, "name")
				target := rapid.StringMatching(`[a-z./]{1,20}`).Draw(rt, "target")
				d, _ := h.m.resolve(dir)
				parent, _ := h.lookupPath(dir)
				_, err := h.v.Symlink(h.ctx, parent.Ino, name, target, Cred{})
				if d.kids[name] != nil {
					expectErr(rt, "symlink", err, ErrExists)
					return
				}
				expectErr(rt, "symlink", err, nil)
				d.kids[name] = &mfile{typ: snapshot.TypeSymlink, mode: 0o777, target: target, xattrs: map[string]string{}}
			},
			"link": func(rt *rapid.T) {
				src := filePath(rt)
				dir := dirPath(rt, "dir")
				name := names.Draw(rt, "name")
				f, _ := h.m.resolve(src)
				d, _ := h.m.resolve(dir)
				a, _ := h.lookupPath(src)
				parent, _ := h.lookupPath(dir)
				_, err := h.v.Link(h.ctx, a.Ino, parent.Ino, name)
				if d.kids[name] != nil {
					expectErr(rt, "link", err, ErrExists)
					return
				}
				expectErr(rt, "link", err, nil)
				d.kids[name] = f
			},
			"unlink": func(rt *rapid.T) {
				p := anyPath(rt, "path")
				f, parent := h.m.resolve(p)
				err := h.v.Unlink(h.ctx, h.parentIno(p), path.Base(p))
				if f.typ == snapshot.TypeDir {
					expectErr(rt, "unlink dir", err, ErrIsDir)
					return
				}
				expectErr(rt, "unlink "+p, err, nil)
				delete(parent.kids, path.Base(p))
			},
			"rmdir": func(rt *rapid.T) {
				p := anyPath(rt, "path")
				f, parent := h.m.resolve(p)
				err := h.v.Rmdir(h.ctx, h.parentIno(p), path.Base(p))
				switch {
				case f.typ != snapshot.TypeDir:
					expectErr(rt, "rmdir file", err, ErrNotDir)
				case len(f.kids) > 0:
					expectErr(rt, "rmdir non-empty", err, ErrNotEmpty)
				default:
					expectErr(rt, "rmdir "+p, err, nil)
					delete(parent.kids, path.Base(p))
				}
			},
			"rename": func(rt *rapid.T) {
				src := anyPath(rt, "src")
				dir := dirPath(rt, "dstdir")
				name := names.Draw(rt, "name")
				dst := path.Join(dir, name)
				flags := rapid.SampledFrom([]RenameFlags{0, 0, RenameNoReplace, RenameExchange}).Draw(rt, "flags")
				sf, sp := h.m.resolve(src)
				dp, _ := h.m.resolve(dir)
				tf := dp.kids[name]
				err := h.v.Rename(h.ctx, h.parentIno(src), path.Base(src), h.parentIno(dst), name, flags)
				op := fmt.Sprintf("rename %s -> %s (%d)", src, dst, flags)
				switch {
				case flags == RenameExchange && tf == nil:
					expectErr(rt, op, err, ErrNotFound)
				case flags == RenameNoReplace && tf != nil:
					expectErr(rt, op, err, ErrExists)
				case tf == sf:
					expectErr(rt, op, err, nil)
				case sf.typ == snapshot.TypeDir && isUnder(dir, src):
					expectErr(rt, op, err, ErrInvalid)
				case flags == RenameExchange && tf.typ == snapshot.TypeDir && isUnder(path.Dir(src), dst) && path.Dir(src) != ".":
					expectErr(rt, op, err, ErrInvalid)
				case flags == RenameExchange:
					expectErr(rt, op, err, nil)
					sp.kids[path.Base(src)], dp.kids[name] = tf, sf
				case tf != nil && sf.typ == snapshot.TypeDir && tf.typ != snapshot.TypeDir:
					expectErr(rt, op, err, ErrNotDir)
				case tf != nil && sf.typ != snapshot.TypeDir && tf.typ == snapshot.TypeDir:
					expectErr(rt, op, err, ErrIsDir)
				case tf != nil && tf.typ == snapshot.TypeDir && len(tf.kids) > 0:
					expectErr(rt, op, err, ErrNotEmpty)
				default:
					expectErr(rt, op, err, nil)
					delete(sp.kids, path.Base(src))
					dp.kids[name] = sf
				}
			},
			"chmod": func(rt *rapid.T) {
				p := anyPath(rt, "path")
				f, _ := h.m.resolve(p)
				if f.typ == snapshot.TypeSymlink {
					return
				}
				mode := uint32(rapid.IntRange(0, 0o7777).Draw(rt, "mode"))
				a, _ := h.lookupPath(p)
				_, err := h.v.SetAttr(h.ctx, a.Ino, SetAttrIn{Mode: &mode})
				expectErr(rt, "chmod", err, nil)
				f.mode = mode
			},
			"setxattr": func(rt *rapid.T) {
				p := anyPath(rt, "path")
				f, _ := h.m.resolve(p)
				name := rapid.SampledFrom([]string{"user.x", "user.y", "trusted.z"}).Draw(rt, "xname")
				val := rapid.StringMatching(`[a-z]{0,10}`).Draw(rt, "xval")
				a, _ := h.lookupPath(p)
				if rapid.Bool().Draw(rt, "remove") {
					err := h.v.RemoveXattr(h.ctx, a.Ino, name)
					if _, ok := f.xattrs[name]; !ok {
						expectErr(rt, "removexattr", err, ErrNoAttr)
						return
					}
					expectErr(rt, "removexattr", err, nil)
					delete(f.xattrs, name)
					return
				}
				err := h.v.SetXattr(h.ctx, a.Ino, name, []byte(val), 0)
				expectErr(rt, "setxattr", err, nil)
				f.xattrs[name] = val
			},
			"sync": func(rt *rapid.T) {
				if err := h.v.Sync(h.ctx); err != nil {
					rt.Fatalf("sync: %v", err)
				}
				// The follower moves to the new head and sees the same.
				if err := h.r.follow(h.ctx); err != nil {
					rt.Fatalf("follow: %v", err)
				}
				h.checkVol(rt, h.r)
			},
			"pin": func(rt *rapid.T) { h.pin(rt, filePath(rt)) },
			"unpin": func(rt *rapid.T) {
				if len(h.pins) == 0 {
					rt.Skip("nothing pinned")
				}
				h.unpin(rt, rapid.IntRange(0, len(h.pins)-1).Draw(rt, "pin"))
			},
			"reopen": func(rt *rapid.T) { h.reopen(rt, false) },
			"fresh":  func(rt *rapid.T) { h.reopen(rt, true) },
		})
		h.reopen(rt, true)
		h.check(rt)
		if err := h.v.Close(h.ctx); err != nil {
			rt.Fatalf("close: %v", err)
		}
		if err := h.r.Close(h.ctx); err != nil {
			rt.Fatalf("close follower: %v", err)
		}
	})
}
