package snapshot_test

// Test fixtures of the snapshot/fork/diff/gc/fsck tests: volumes on mem://
// and file:// stores, and a tree builder that writes packs, trees, link
// tables and commits with the snapshot API, deduplicating chunks and trees
// across builds the way a writer that keeps unchanged data does.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/snapshot"
)

// fspec describes one path of a tree to build.
type fspec struct {
	Data   string
	Mode   uint32 // default 0644, dirs 0755, symlinks 0777
	Dir    bool
	Target string // a symlink when set
	Link   string // hard-link group name: paths of one group are one file
	Xattrs map[string]string
	Uid    uint32
}

// vol is a test volume.
type vol struct {
	t     testing.TB
	ctx   context.Context
	url   string
	store *blobstore.Store
	r     *snapshot.Repo
	known map[snapshot.Hash]snapshot.BlobRef // stored blobs, for dedup
	clock time.Time
	// splitTrees makes build store trees and file data in separate packs.
	splitTrees bool
}

var storeSeq atomic.Int64

// encryptedURLs holds the URLs of kind "mem-encrypted": newVol makes an
// encrypted volume there, locked with testKey.
var encryptedURLs sync.Map

// testKey is the user key of the encrypted test volumes.
var testKey = snapshot.UserKey{Key: []byte("0123456789abcdef0123456789abcdef")}

func testKeys(bool) (snapshot.UserKey, error) { return testKey, nil }

// storeURL returns the URL of a fresh, empty store of a kind: "mem",
// "file", "minio" (an S3 bucket on a MinIO server the test starts) or "gcs"
// (a prefix of a bucket on the GCS emulator the test starts; see
// internal/testservices: without the service the test fails under CI and
// is skipped with the reason elsewhere).
func storeURL(t testing.TB, kind string) string {
	switch kind {
	case "mem":
		return fmt.Sprintf("mem://snapshot-test-%d-%d", os.Getpid(), storeSeq.Add(1))
	case "mem-encrypted":
		u := fmt.Sprintf("mem://snapshot-test-enc-%d-%d", os.Getpid(), storeSeq.Add(1))
		encryptedURLs.Store(u, true)
		return u
	case "file":
		return "file://" + t.TempDir()
	case "minio":
		return testservices.StartMinIO(t)
	case "gcs":
		return testservices.StartGCSEmulator(t) + "/vol"
	}
	t.Fatalf("unknown store kind %q", kind)
	return ""
}

// stores returns a fresh mem:// and file:// store URL.
func stores(t testing.TB) map[string]string {
	return map[string]string{"mem": storeURL(t, "mem"), "file": storeURL(t, "file")}
}

// forEachStore runs f as a subtest on a fresh store of every kind, and on
// an encrypted volume in memory. The MinIO server is started once for all
// of them.
func forEachStore(t *testing.T, f func(t *testing.T, url string)) {
	testservices.StartMinIO(t) // keeps the server up across the subtests
	for _, kind := range []string{"mem", "file", "minio", "mem-encrypted"} {
		t.Run(kind, func(t *testing.T) { f(t, storeURL(t, kind)) })
	}
}

// newVol creates a volume with 4 KiB chunks and an empty main branch.
func newVol(t testing.TB, url string) *vol {
	t.Helper()
	ctx := context.Background()
	s, err := blobstore.Open(ctx, url, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	cfg := snapshot.NewConfig(time.Unix(1700000000, 0))
	cfg.ChunkSize = 4096
	var r *snapshot.Repo
	if _, enc := encryptedURLs.Load(url); enc {
		r, err = snapshot.InitEncrypted(ctx, s, cfg, testKey)
	} else {
		r, err = snapshot.Init(ctx, s, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	v := &vol{t: t, ctx: ctx, url: url, store: s, r: r, known: map[snapshot.Hash]snapshot.BlobRef{}, clock: time.Unix(1700000000, 0)}
	if _, err := r.CreateBranchEmpty(ctx, "main", 0o755, 0, 0, v.clock, "test", "init"); err != nil {
		t.Fatal(err)
	}
	return v
}

// reopen returns a second Repo on the same store (another "process").
func (v *vol) reopen() *snapshot.Repo {
	v.t.Helper()
	r, err := snapshot.OpenWithKey(v.ctx, v.store, testKeys)
	if err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(r.Close)
	return r
}

func (v *vol) now() time.Time {
	v.clock = v.clock.Add(time.Second)
	return v.clock
}

type dnode struct {
	spec     fspec
	children map[string]bool
}

// build stores the tree described by files (in one new pack, reusing every
// chunk and tree stored before) and returns it.
func (v *vol) build(files map[string]fspec) snapshot.TreeRoot {
	v.t.Helper()
	dirs := map[string]*dnode{"": {spec: fspec{Dir: true, Mode: 0o755}, children: map[string]bool{}}}
	var ensureDir func(p string)
	ensureDir = func(p string) {
		if _, ok := dirs[p]; ok {
			return
		}
		parent := path.Dir(p)
		if parent == "." {
			parent = ""
		}
		ensureDir(parent)
		dirs[parent].children[p] = true
		dirs[p] = &dnode{spec: fspec{Dir: true, Mode: 0o755}, children: map[string]bool{}}
	}
	for p, s := range files {
		if s.Dir {
			ensureDir(p)
			dirs[p].spec = s
			continue
		}
		parent := path.Dir(p)
		if parent == "." {
			parent = ""
		}
		ensureDir(parent)
		dirs[parent].children[p] = true
	}
	pw, tw := v.r.NewPackWriter(), v.r.NewPackWriter()
	if !v.splitTrees {
		tw = pw
	}
	pending := map[snapshot.Hash]snapshot.BlobRef{}
	add := func(t snapshot.BlobType, raw []byte) snapshot.BlobRef {
		h := v.r.HashOf(raw)
		if ref, ok := v.known[h]; ok {
			return ref
		}
		if ref, ok := pending[h]; ok {
			return ref
		}
		w := &pw
		if t == snapshot.BlobTree && v.splitTrees {
			w = &tw
		}
		if (*w).Len() >= v.r.Config().PackSize {
			if err := v.r.PutPack(v.ctx, *w); err != nil {
				v.t.Fatal(err)
			}
			split := v.splitTrees
			*w = v.r.NewPackWriter()
			if !split {
				tw = pw
			}
		}
		ref := (*w).Add(v.r.EncodeBlob(t, raw))
		pending[h] = ref
		return ref
	}
	ts := int64(1700000000e9) // fixed: unchanged entries encode to equal trees across builds
	fileEntry := func(name string, s fspec) snapshot.Entry {
		e := snapshot.Entry{Name: name, Type: snapshot.TypeFile, Mode: s.Mode, Uid: s.Uid, Nlink: 1, Atime: ts, Mtime: ts, Ctime: ts}
		if e.Mode == 0 {
			e.Mode = 0o644
		}
		for k, val := range s.Xattrs {
			e.Xattrs = append(e.Xattrs, snapshot.Xattr{Name: k, Value: []byte(val)})
		}
		slices.SortFunc(e.Xattrs, func(a, b snapshot.Xattr) int { return strings.Compare(a.Name, b.Name) })
		if s.Target != "" {
			e.Type, e.Target, e.Size = snapshot.TypeSymlink, s.Target, uint64(len(s.Target))
			if s.Mode == 0 {
				e.Mode = 0o777
			}
			return e
		}
		data := []byte(s.Data)
		e.Size = uint64(len(data))
		cs := v.r.Config().ChunkSize
		for i := 0; i*cs < len(data); i++ {
			e.Chunks = append(e.Chunks, snapshot.Chunk{Index: uint64(i), Ref: add(snapshot.BlobData, data[i*cs:min(len(data), (i+1)*cs)])})
		}
		return e
	}
	// Hard-link groups.
	groups := map[string][]string{}
	for p, s := range files {
		if s.Link != "" {
			groups[s.Link] = append(groups[s.Link], p)
		}
	}
	var links []snapshot.Entry
	linkIDs := map[string]uint64{}
	for g, ps := range groups {
		sort.Strings(ps)
		h := fnv.New64a()
		h.Write([]byte(g))
		id := h.Sum64() | 1
		linkIDs[g] = id
		e := fileEntry(snapshot.LinkName(id), files[ps[0]])
		e.Nlink = uint32(len(ps))
		links = append(links, e)
	}
	type built struct {
		ref          snapshot.BlobRef
		files, bytes uint64
		subdirs      int
	}
	var buildDir func(p string) built
	buildDir = func(p string) built {
		d := dirs[p]
		var entries []snapshot.Entry
		var b built
		for c := range d.children {
			name := path.Base(c)
			if _, isDir := dirs[c]; isDir {
				sub := buildDir(c)
				s := dirs[c].spec
				e := snapshot.Entry{Name: name, Type: snapshot.TypeDir, Mode: s.Mode, Uid: s.Uid, Nlink: uint32(2 + sub.subdirs),
					Atime: ts, Mtime: ts, Ctime: ts, Tree: sub.ref, SubFiles: sub.files, SubBytes: sub.bytes}
				if e.Mode == 0 {
					e.Mode = 0o755
				}
				entries = append(entries, e)
				b.files += sub.files
				b.bytes += sub.bytes
				b.subdirs++
				continue
			}
			s := files[c]
			if s.Link != "" {
				entries = append(entries, snapshot.Entry{Name: name, Type: snapshot.TypeFile, LinkID: linkIDs[s.Link], Nlink: uint32(len(groups[s.Link]))})
				b.files++
				b.bytes += uint64(len(files[groups[s.Link][0]].Data))
				continue
			}
			e := fileEntry(name, s)
			entries = append(entries, e)
			b.files++
			b.bytes += e.Size
		}
		raw, err := snapshot.EncodeTree(entries)
		if err != nil {
			v.t.Fatal(err)
		}
		b.ref = add(snapshot.BlobTree, raw)
		return b
	}
	root := buildDir("")
	tr := snapshot.TreeRoot{Root: snapshot.RootDir{Mode: dirs[""].spec.Mode, Nlink: uint32(2 + root.subdirs), Atime: ts, Mtime: ts, Ctime: ts,
		Tree: root.ref, SubFiles: root.files, SubBytes: root.bytes}}
	if len(links) > 0 {
		raw, err := snapshot.EncodeTree(links)
		if err != nil {
			v.t.Fatal(err)
		}
		ref := add(snapshot.BlobTree, raw)
		tr.Links = &ref
	}
	for _, w := range []*snapshot.PackWriter{pw, tw} {
		if w.Count() > 0 {
			if err := v.r.PutPack(v.ctx, w); err != nil {
				v.t.Fatal(err)
			}
		}
		if tw == pw {
			break
		}
	}
	for h, ref := range pending {
		v.known[h] = ref
	}
	return tr
}

// commit builds files and commits them as the next commit of branch (the
// first one if the branch has none).
func (v *vol) commit(branch string, files map[string]fspec) snapshot.Commit {
	v.t.Helper()
	tr := v.build(files)
	return v.commitTree(branch, tr)
}

func (v *vol) commitTree(branch string, tr snapshot.TreeRoot) snapshot.Commit {
	v.t.Helper()
	seq, err := v.r.HeadSeq(v.ctx, branch)
	if err != nil && !errors.Is(err, snapshot.ErrNoCommits) {
		v.t.Fatal(err)
	}
	c := snapshot.Commit{ID: snapshot.CommitID{Branch: branch, Seq: seq + 1}, Root: tr.Root, Links: tr.Links,
		Time: v.now(), Kind: "test"}
	if seq > 0 {
		c.Parent = &snapshot.CommitID{Branch: branch, Seq: seq}
	}
	if err := v.r.WriteCommit(v.ctx, c); err != nil {
		v.t.Fatal(err)
	}
	return c
}

// manifest describes every path of tr: type, mode, owner, xattrs, target,
// and the SHA-256 of file contents (read through ReadEntry), with hard
// links resolved.
func manifest(t testing.TB, r *snapshot.Repo, tr snapshot.TreeRoot) map[string]string {
	t.Helper()
	ctx := context.Background()
	m := map[string]string{}
	err := r.Walk(ctx, tr, func(p string, e snapshot.Entry) error {
		desc := fmt.Sprintf("%s %o %d:%d", e.Type, e.Mode, e.Uid, e.Gid)
		for _, x := range e.Xattrs {
			desc += fmt.Sprintf(" %s=%q", x.Name, x.Value)
		}
		switch e.Type {
		case snapshot.TypeFile:
			b, err := r.ReadEntry(ctx, e, -1)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += fmt.Sprintf(" %d %s", len(b), hex.EncodeToString(sum[:8]))
			if e.LinkID != 0 {
				desc += fmt.Sprintf(" nlink=%d", e.Nlink)
			}
		case snapshot.TypeSymlink:
			desc += " -> " + e.Target
		}
		m[p] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("walk: %v", err)
	}
	return m
}

// readPath reads the file at p of tr.
func readPath(t testing.TB, r *snapshot.Repo, tr snapshot.TreeRoot, p string) string {
	t.Helper()
	ctx := context.Background()
	e, err := r.LookupPath(ctx, tr, p)
	if err != nil {
		t.Fatalf("lookup %s: %v", p, err)
	}
	b, err := r.ReadEntry(ctx, e, -1)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

// packBytes returns the number and total size of the stored packs.
func packBytes(t testing.TB, s *blobstore.Store) (int, int64) {
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

// mustFsck runs a full fsck and fails the test on any problem.
func mustFsck(t testing.TB, r *snapshot.Repo) snapshot.FsckReport {
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

// future returns a gc clock far enough ahead that every existing object
// is older than the grace period g.
func future(g time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(g + time.Minute) }
}
