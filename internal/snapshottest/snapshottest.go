// Package snapshottest helps tests of snapshots, forks, gc and fsck drive
// real volumes: a Workspace runs the engine behind a mount (cache.Volume)
// on one branch with path-level helpers, and the manifest functions
// describe a live workspace or a stored tree in the same form
// (posixtest.Manifest), so that a snapshot, a restore or a fork can be
// compared with what a writer wrote, content hashes, modes, times, links
// and xattrs included.
//
// It exists outside snapshot/ because snapshot/ may not import cache/
// (not even in tests); it is imported by tests only.
package snapshottest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/snapshot"
)

// ChunkSize is the chunk size of volumes made by InitVolume: small, so that
// multi-chunk files stay cheap in tests.
const ChunkSize = 64 << 10

// InitVolume creates a volume with ChunkSize chunks and an empty main
// branch at url, and returns it opened (closed when t ends).
func InitVolume(t testing.TB, url string) (*blobstore.Store, *snapshot.Repo) {
	t.Helper()
	ctx := context.Background()
	s, err := blobstore.Open(ctx, url, blobstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cfg := snapshot.NewConfig(time.Now())
	cfg.ChunkSize = ChunkSize
	r, err := snapshot.Init(ctx, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if _, err := r.CreateBranchEmpty(ctx, snapshot.DefaultBranch, 0o755, 0, 0, time.Now(), "test", "init"); err != nil {
		t.Fatal(err)
	}
	return s, r
}

// Workspace is a cache.Volume on one branch of a volume, as a mount would
// hold it, with path-level helpers that fail t on error. Its methods may be
// called from several goroutines, but t's failure methods then only record
// (use the error-returning engine calls for that).
type Workspace struct {
	T      testing.TB
	V      *cache.Volume
	Repo   *snapshot.Repo
	Branch string
	ctx    context.Context
	closed bool
}

// OpenWorkspace opens branch of repo in a fresh cache directory, with
// automatic checkpoints off (Sync commits) and a writer lease held until
// Close. opts may adjust the options. It is closed when t ends.
func OpenWorkspace(t testing.TB, repo *snapshot.Repo, branch string, opts ...func(*cache.Options)) *Workspace {
	t.Helper()
	o := cache.Options{Repo: repo, CacheDir: t.TempDir(), Branch: branch, CheckpointInterval: -1,
		Logger: slog.New(slog.DiscardHandler), Host: "test", MountPoint: "/test/" + branch}
	for _, f := range opts {
		f(&o)
	}
	v, err := cache.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("open workspace on %s: %v", branch, err)
	}
	w := &Workspace{T: t, V: v, Repo: repo, Branch: branch, ctx: context.Background()}
	t.Cleanup(func() {
		if !w.closed {
			if err := v.Close(context.Background()); err != nil && !errors.Is(err, cache.ErrClosed) {
				t.Errorf("close workspace %s: %v", branch, err)
			}
		}
	})
	return w
}

// Close commits and closes the workspace (releasing its lease).
func (w *Workspace) Close() {
	w.T.Helper()
	w.closed = true
	if err := w.V.Close(w.ctx); err != nil {
		w.T.Fatalf("close workspace %s: %v", w.Branch, err)
	}
}

// Sync commits everything written so far.
func (w *Workspace) Sync() {
	w.T.Helper()
	if err := w.V.Sync(w.ctx); err != nil {
		w.T.Fatalf("sync %s: %v", w.Branch, err)
	}
}

// Lookup returns the inode at p ("" or "." is the root).
func (w *Workspace) Lookup(p string) (cache.Attr, error) {
	ino := cache.RootIno
	a, err := w.V.GetAttr(w.ctx, ino)
	if err != nil {
		return a, err
	}
	for _, name := range split(p) {
		if a, err = w.V.Lookup(w.ctx, a.Ino, name); err != nil {
			return a, fmt.Errorf("%s: %w", p, err)
		}
	}
	return a, nil
}

func split(p string) []string {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// dir returns the inode of p's parent directory, creating missing
// directories, and p's last component.
func (w *Workspace) dir(p string) (uint64, string, error) {
	parts := split(p)
	if len(parts) == 0 {
		return 0, "", fmt.Errorf("empty path")
	}
	ino := cache.RootIno
	for _, name := range parts[:len(parts)-1] {
		a, err := w.V.Lookup(w.ctx, ino, name)
		if errors.Is(err, cache.ErrNotFound) {
			a, err = w.V.Mkdir(w.ctx, ino, name, 0o755, cache.Cred{})
		}
		if err != nil {
			return 0, "", fmt.Errorf("%s: %w", p, err)
		}
		ino = a.Ino
	}
	return ino, parts[len(parts)-1], nil
}

// WriteFileErr creates or truncates p (and its parent directories) and
// writes data.
func (w *Workspace) WriteFileErr(p string, data []byte) error {
	parent, name, err := w.dir(p)
	if err != nil {
		return err
	}
	a, err := w.V.Create(w.ctx, parent, name, 0o644, cache.Cred{}, false, true)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	if len(data) > 0 {
		if _, err := w.V.Write(w.ctx, a.Ino, data, 0); err != nil {
			_ = w.V.Release(w.ctx, a.Ino)
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return w.V.Release(w.ctx, a.Ino)
}

// WriteFile is WriteFileErr failing t.
func (w *Workspace) WriteFile(p string, data []byte) {
	w.T.Helper()
	if err := w.WriteFileErr(p, data); err != nil {
		w.T.Fatal(err)
	}
}

// RemoveErr removes the file (or empty directory) p.
func (w *Workspace) RemoveErr(p string) error {
	parent, name, err := w.dir(p)
	if err != nil {
		return err
	}
	a, err := w.V.Lookup(w.ctx, parent, name)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if a.Type == snapshot.TypeDir {
		return w.V.Rmdir(w.ctx, parent, name)
	}
	return w.V.Unlink(w.ctx, parent, name)
}

// Remove is RemoveErr failing t.
func (w *Workspace) Remove(p string) {
	w.T.Helper()
	if err := w.RemoveErr(p); err != nil {
		w.T.Fatal(err)
	}
}

// Mkdir creates directory p (and its parents).
func (w *Workspace) Mkdir(p string, mode uint32) {
	w.T.Helper()
	parent, name, err := w.dir(p)
	if err == nil {
		_, err = w.V.Mkdir(w.ctx, parent, name, mode, cache.Cred{})
	}
	if err != nil {
		w.T.Fatalf("mkdir %s: %v", p, err)
	}
}

// Symlink creates symlink p pointing to target.
func (w *Workspace) Symlink(p, target string) {
	w.T.Helper()
	parent, name, err := w.dir(p)
	if err == nil {
		_, err = w.V.Symlink(w.ctx, parent, name, target, cache.Cred{})
	}
	if err != nil {
		w.T.Fatalf("symlink %s: %v", p, err)
	}
}

// Mkfifo creates FIFO p.
func (w *Workspace) Mkfifo(p string) {
	w.T.Helper()
	parent, name, err := w.dir(p)
	if err == nil {
		_, err = w.V.Mknod(w.ctx, parent, name, cache.ModeFIFO|0o600, 0, cache.Cred{})
	}
	if err != nil {
		w.T.Fatalf("mkfifo %s: %v", p, err)
	}
}

// Link makes newPath a hard link of oldPath.
func (w *Workspace) Link(oldPath, newPath string) {
	w.T.Helper()
	a, err := w.Lookup(oldPath)
	if err != nil {
		w.T.Fatal(err)
	}
	parent, name, err := w.dir(newPath)
	if err == nil {
		_, err = w.V.Link(w.ctx, a.Ino, parent, name)
	}
	if err != nil {
		w.T.Fatalf("link %s %s: %v", oldPath, newPath, err)
	}
}

// SetXattr sets extended attribute name of p.
func (w *Workspace) SetXattr(p, name string, value []byte) {
	w.T.Helper()
	a, err := w.Lookup(p)
	if err == nil {
		err = w.V.SetXattr(w.ctx, a.Ino, name, value, 0)
	}
	if err != nil {
		w.T.Fatalf("setxattr %s %s: %v", p, name, err)
	}
}

// Chmod sets the permission bits of p.
func (w *Workspace) Chmod(p string, mode uint32) {
	w.T.Helper()
	a, err := w.Lookup(p)
	if err == nil {
		_, err = w.V.SetAttr(w.ctx, a.Ino, cache.SetAttrIn{Mode: &mode})
	}
	if err != nil {
		w.T.Fatalf("chmod %s: %v", p, err)
	}
}

// ReadFileErr reads the whole file p.
func (w *Workspace) ReadFileErr(p string) ([]byte, error) {
	a, err := w.Lookup(p)
	if err != nil {
		return nil, err
	}
	return readIno(w.ctx, w.V, a.Ino)
}

// ReadFile is ReadFileErr failing t.
func (w *Workspace) ReadFile(p string) []byte {
	w.T.Helper()
	b, err := w.ReadFileErr(p)
	if err != nil {
		w.T.Fatal(err)
	}
	return b
}

func readIno(ctx context.Context, v *cache.Volume, ino uint64) ([]byte, error) {
	a, err := v.Open(ctx, ino, false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = v.Release(ctx, ino) }()
	buf := make([]byte, a.Size)
	for off := 0; off < len(buf); {
		n, err := v.Read(ctx, ino, buf[off:], uint64(off))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("inode %d: short read at %d of %d", ino, off, len(buf))
		}
		off += n
	}
	return buf, nil
}

// Manifest describes the workspace's live namespace (what a mount shows).
func (w *Workspace) Manifest() posixtest.Manifest {
	w.T.Helper()
	m, err := ManifestOfVolume(w.ctx, w.V)
	if err != nil {
		w.T.Fatalf("manifest of %s: %v", w.Branch, err)
	}
	return m
}

func hashHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func ftype(t snapshot.EntryType) posixtest.FileType {
	switch t {
	case snapshot.TypeDir:
		return posixtest.TypeDir
	case snapshot.TypeSymlink:
		return posixtest.TypeSymlink
	case snapshot.TypeFIFO:
		return posixtest.TypeFIFO
	case snapshot.TypeSocket:
		return posixtest.TypeSocket
	case snapshot.TypeCharDev:
		return posixtest.TypeCharDev
	case snapshot.TypeBlockDev:
		return posixtest.TypeBlockDev
	}
	return posixtest.TypeFile
}

// ManifestOfVolume walks a volume's live namespace through the engine API
// and describes every path, reading every file. Directory entries carry no
// Size (as posixtest does).
func ManifestOfVolume(ctx context.Context, v *cache.Volume) (posixtest.Manifest, error) {
	m := posixtest.Manifest{}
	groups := map[uint64][]string{}
	var walk func(ino uint64, p string) error
	walk = func(ino uint64, p string) error {
		a, err := v.GetAttr(ctx, ino)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		e := posixtest.Entry{Type: ftype(a.Type), Perm: a.Mode, UID: a.Uid, GID: a.Gid, Nlink: uint64(a.Nlink),
			Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime}
		names, err := v.ListXattr(ctx, ino)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, n := range names {
			val, err := v.GetXattr(ctx, ino, n)
			if err != nil {
				return fmt.Errorf("%s: xattr %s: %w", p, n, err)
			}
			if e.Xattrs == nil {
				e.Xattrs = map[string]string{}
			}
			e.Xattrs[n] = string(val)
		}
		switch a.Type {
		case snapshot.TypeFile:
			b, err := readIno(ctx, v, ino)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			e.Size, e.SHA256 = int64(len(b)), hashHex(b)
		case snapshot.TypeSymlink:
			if e.Target, err = v.Readlink(ctx, ino); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			e.Size = int64(len(e.Target))
			e.Atime = 0
		case snapshot.TypeCharDev, snapshot.TypeBlockDev:
			e.Rdev = a.Rdev
		}
		if a.Type != snapshot.TypeDir && a.Nlink > 1 {
			groups[ino] = append(groups[ino], p)
		}
		m[p] = e
		if a.Type != snapshot.TypeDir {
			return nil
		}
		ents, err := v.ReadDir(ctx, ino)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, d := range ents {
			if err := walk(d.Ino, joinPath(p, d.Name)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(cache.RootIno, "."); err != nil {
		return nil, err
	}
	setGroups(m, groups)
	return m, nil
}

func joinPath(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

func setGroups[K comparable](m posixtest.Manifest, groups map[K][]string) {
	for _, ps := range groups {
		slices.Sort(ps)
		for _, p := range ps {
			e := m[p]
			e.LinkGroup = ps[0]
			m[p] = e
		}
	}
}

// ManifestOfTree describes a stored tree (a commit's or a snapshot's) in
// the same form as ManifestOfVolume, reading every file.
func ManifestOfTree(ctx context.Context, r *snapshot.Repo, t snapshot.TreeRoot) (posixtest.Manifest, error) {
	m := posixtest.Manifest{}
	root := snapshot.RootEntry(t)
	m["."] = entryOf(root)
	m["."] = withXattrs(m["."], root)
	groups := map[uint64][]string{}
	err := r.Walk(ctx, t, func(p string, e snapshot.Entry) error {
		me := withXattrs(entryOf(e), e)
		switch e.Type {
		case snapshot.TypeFile:
			b, err := r.ReadEntry(ctx, e, -1)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			me.Size, me.SHA256 = int64(len(b)), hashHex(b)
		case snapshot.TypeSymlink:
			me.Target, me.Size, me.Atime = e.Target, int64(len(e.Target)), 0
		}
		if e.LinkID != 0 && e.Nlink > 1 {
			groups[e.LinkID] = append(groups[e.LinkID], p)
		}
		m[p] = me
		return nil
	})
	if err != nil {
		return nil, err
	}
	setGroups(m, groups)
	return m, nil
}

func entryOf(e snapshot.Entry) posixtest.Entry {
	me := posixtest.Entry{Type: ftype(e.Type), Perm: e.Mode, UID: e.Uid, GID: e.Gid, Nlink: uint64(e.Nlink),
		Atime: e.Atime, Mtime: e.Mtime, Ctime: e.Ctime}
	if e.Type == snapshot.TypeCharDev || e.Type == snapshot.TypeBlockDev {
		me.Rdev = e.Rdev
	}
	return me
}

func withXattrs(me posixtest.Entry, e snapshot.Entry) posixtest.Entry {
	for _, x := range e.Xattrs {
		if me.Xattrs == nil {
			me.Xattrs = map[string]string{}
		}
		me.Xattrs[x.Name] = string(x.Value)
	}
	return me
}

// PackBytes returns the number and total size of a store's packs.
func PackBytes(t testing.TB, s *blobstore.Store) (int, int64) {
	t.Helper()
	var n int
	var size int64
	err := s.Walk(context.Background(), "packs/", func(o blobstore.ObjectInfo) error {
		n++
		size += o.Size
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, size
}

// MustFsck runs a full fsck and fails t on any problem.
func MustFsck(t testing.TB, r *snapshot.Repo) snapshot.FsckReport {
	t.Helper()
	rep, err := r.Fsck(context.Background(), snapshot.FsckOptions{Full: true})
	if err != nil {
		t.Fatalf("fsck: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("fsck problem: %s: %s %v", p.Object, p.Message, p.Affected)
	}
	if !rep.OK() {
		t.FailNow()
	}
	return rep
}
