package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/cache"
)

func TestErrno(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("lookup ino 7 %q: %w", "x", err) }
	cases := []struct {
		name  string
		err   error
		want  syscall.Errno
		known bool
	}{
		{"nil", nil, 0, true},
		{"canceled", context.Canceled, syscall.EINTR, true},
		{"deadline", wrap(context.DeadlineExceeded), syscall.EINTR, true},
		{"canceled wins over a kind", errors.Join(cache.ErrIO, context.Canceled), syscall.EINTR, true},
		{"not found", wrap(cache.ErrNotFound), syscall.ENOENT, true},
		{"exists", wrap(cache.ErrExists), syscall.EEXIST, true},
		{"not empty", wrap(cache.ErrNotEmpty), syscall.ENOTEMPTY, true},
		{"not dir", wrap(cache.ErrNotDir), syscall.ENOTDIR, true},
		{"is dir", wrap(cache.ErrIsDir), syscall.EISDIR, true},
		{"invalid", wrap(cache.ErrInvalid), syscall.EINVAL, true},
		{"name too long", wrap(cache.ErrNameTooLong), syscall.ENAMETOOLONG, true},
		{"read-only", wrap(cache.ErrReadOnly), syscall.EROFS, true},
		{"no attr", wrap(cache.ErrNoAttr), syscall.ENODATA, true},
		{"range", wrap(cache.ErrRange), syscall.ERANGE, true},
		{"not supported", wrap(cache.ErrNotSupported), syscall.EOPNOTSUPP, true},
		{"permission", wrap(cache.ErrPermission), syscall.EPERM, true},
		{"too big", wrap(cache.ErrFileTooBig), syscall.EFBIG, true},
		{"loop", wrap(cache.ErrLoop), syscall.ELOOP, true},
		{"no space", wrap(cache.ErrNoSpace), syscall.ENOSPC, true},
		{"closed", wrap(cache.ErrClosed), syscall.ENOTCONN, true},
		{"io", wrap(cache.ErrIO), syscall.EIO, true},
		{"local disk full", wrap(&os.PathError{Op: "write", Path: "/cache/data/1", Err: syscall.ENOSPC}), syscall.ENOSPC, true},
		{"local quota", wrap(&os.PathError{Op: "write", Path: "/cache/data/1", Err: syscall.EDQUOT}), syscall.EDQUOT, true},
		{"raw errno from the engine", wrap(syscall.EBADF), syscall.EIO, false},
		{"unknown", errors.New("something odd"), syscall.EIO, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, known := Errno(c.err)
			if got != c.want || known != c.known {
				t.Errorf("Errno(%v) = %v (%d), known %v; want %v (%d), known %v", c.err, got, got, known, c.want, c.want, c.known)
			}
		})
	}
}

// TestErrnoCoversEveryKind fails when cache grows an error kind that Errno
// does not map (it would fall through to EIO and a log line). The kinds are
// read from cache's source: every exported package-level Err* variable.
// The namespace's kinds are cache/ns's, which cache returns under the same
// names: each of them must be one of cache's.
func TestErrnoCoversEveryKind(t *testing.T) {
	names := errorKinds(t, "../cache")
	if len(names) < 10 {
		t.Fatalf("found only %d error kinds in cache's source (%v): is the parser looking in the right place?", len(names), names)
	}
	nsNames := errorKinds(t, "../cache/ns")
	if len(nsNames) < 5 {
		t.Fatalf("found only %d error kinds in cache/ns's source (%v): is the parser looking in the right place?", len(nsNames), nsNames)
	}
	for _, n := range nsNames {
		if !slices.Contains(names, n) {
			t.Errorf("ns.%s is not one of cache's error kinds (var %s = ns.%s in cache/errors.go): fs/ would not map it", n, n, n)
		}
	}
	mapped := map[string]bool{"ErrIO": true} // handled by Errno after the table
	table := errnoTableNames(t)
	for _, n := range table {
		mapped[n] = true
	}
	for _, n := range names {
		if !mapped[n] {
			t.Errorf("cache.%s has no row in errnoTable (fs/errno.go): it would become EIO and a log line", n)
		}
	}
	// Each row's kind is known and no two cache kinds share an errno.
	seen := map[syscall.Errno]error{syscall.EIO: cache.ErrIO}
	for _, row := range errnoTable {
		if errors.Is(row.kind, context.Canceled) || errors.Is(row.kind, context.DeadlineExceeded) {
			continue // both EINTR by design
		}
		errno, known := Errno(row.kind)
		if !known || errno == 0 || errno != row.errno {
			t.Errorf("%v: errno %v known %v, table says %v", row.kind, errno, known, row.errno)
		}
		if prev, dup := seen[errno]; dup {
			t.Errorf("%v and %v both map to %v", prev, row.kind, errno)
		}
		seen[errno] = row.kind
	}
	if errno, known := Errno(cache.ErrIO); errno != syscall.EIO || !known {
		t.Errorf("ErrIO: errno %v known %v", errno, known)
	}
}

// errorKinds returns the names of the exported package-level variables
// named Err* in the non-test Go files of the package in dir.
func errorKinds(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("list %s's source: %v (%d files)", dir, err, len(files))
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(id.Name, "Err") && id.IsExported() {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	return names
}

// errnoTableNames returns the cache.Err* selectors of errnoTable's rows, read
// from errno.go, so that a kind can be matched to its row by name.
func errnoTableNames(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	af, err := parser.ParseFile(fset, "errno.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(af, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "errnoTable" {
			return true
		}
		ast.Inspect(vs, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "cache" {
					names = append(names, sel.Sel.Name)
				}
			}
			return true
		})
		return false
	})
	if len(names) != len(errnoTable)-2 { // the two context rows
		t.Fatalf("read %d cache kinds from errnoTable's source, the table has %d rows (2 of them context errors)", len(names), len(errnoTable))
	}
	return names
}

func TestToErrnoLogs(t *testing.T) {
	var buf bytes.Buffer
	fsys := &filesystem{log: slog.New(slog.NewTextHandler(&buf, nil))}
	if e := fsys.toErrno("lookup", 3, cache.ErrNotFound); e != syscall.ENOENT || buf.Len() != 0 {
		t.Errorf("known kind: %v, logged %q", e, buf.String())
	}
	if e := fsys.toErrno("read", 3, fmt.Errorf("chunk: %w", cache.ErrIO)); e != syscall.EIO || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("ErrIO: %v, logged %q", e, buf.String())
	}
	buf.Reset()
	if e := fsys.toErrno("write", 9, errors.New("badger exploded")); e != syscall.EIO {
		t.Errorf("unknown: %v", e)
	}
	if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "badger exploded") || !strings.Contains(got, "op=write") || !strings.Contains(got, "ino=9") {
		t.Errorf("unknown error logged %q, want one line naming the op, inode and error", got)
	}
}

func TestPanicHandler(t *testing.T) {
	var buf bytes.Buffer
	h := panicHandler(slog.New(slog.NewTextHandler(&buf, nil)))
	if st := h("boom"); st != fuse.EIO {
		t.Errorf("status %v, want EIO", st)
	}
	if got := buf.String(); !strings.Contains(got, "boom") || !strings.Contains(got, "TestPanicHandler") {
		t.Errorf("log %q lacks the panic value or the stack", got)
	}
}

func TestTimes(t *testing.T) {
	for _, ns := range []int64{0, 1, 999_999_999, 1_000_000_000, 1_700_000_000_123_456_789, -1, -999_999_999, -1_000_000_000, -86400_000_000_001, 4_400_000_000_000_000_000} {
		sec, nsec := splitTime(ns)
		if nsec >= 1e9 {
			t.Errorf("splitTime(%d): nsec %d out of range", ns, nsec)
		}
		if int64(sec)*1e9+int64(nsec) != ns || joinTime(sec, nsec) != ns {
			t.Errorf("splitTime(%d) = %d, %d; joinTime gives %d", ns, int64(sec), nsec, joinTime(sec, nsec))
		}
	}
}

func TestSetAttrIn(t *testing.T) {
	in := &fuse.SetAttrIn{}
	in.Valid = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_SIZE | fuse.FATTR_ATIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME | fuse.FATTR_CTIME
	in.Mode = 0o104755
	in.Uid, in.Gid = 1000, 55
	in.Size = 77
	in.Mtime, in.Mtimensec = 12, 34
	in.Ctime, in.Ctimensec = 5, 6
	s := setAttrIn(in)
	switch {
	case s.Mode == nil || *s.Mode != 0o4755:
		t.Errorf("mode %v", s.Mode)
	case s.Uid == nil || *s.Uid != 1000 || s.Gid != nil:
		t.Errorf("uid %v gid %v", s.Uid, s.Gid)
	case s.Size == nil || *s.Size != 77:
		t.Errorf("size %v", s.Size)
	case !s.AtimeNow || s.Atime != nil:
		t.Errorf("atime now %v, atime %v", s.AtimeNow, s.Atime)
	case s.MtimeNow || s.Mtime == nil || *s.Mtime != 12_000_000_034:
		t.Errorf("mtime now %v, mtime %v", s.MtimeNow, s.Mtime)
	case s.Ctime == nil || *s.Ctime != 5_000_000_006:
		t.Errorf("ctime %v", s.Ctime)
	}
	if s := setAttrIn(&fuse.SetAttrIn{}); s.Mode != nil || s.Uid != nil || s.Gid != nil || s.Size != nil || s.Atime != nil || s.Mtime != nil || s.Ctime != nil || s.AtimeNow || s.MtimeNow {
		t.Errorf("an empty SETATTR changes %+v", s)
	}
}

func TestCopySized(t *testing.T) {
	v := []byte("value")
	if n, e := copySized(nil, v); n != 5 || e != 0 {
		t.Errorf("size query: %d, %v", n, e)
	}
	if n, e := copySized(make([]byte, 2), v); n != 5 || e != syscall.ERANGE {
		t.Errorf("small buffer: %d, %v", n, e)
	}
	dst := make([]byte, 10)
	if n, e := copySized(dst, v); n != 5 || e != 0 || string(dst[:n]) != "value" {
		t.Errorf("copy: %d, %v, %q", n, e, dst[:n])
	}
	if n, e := copySized(dst, nil); n != 0 || e != 0 {
		t.Errorf("empty value: %d, %v", n, e)
	}
}

func TestParseMountInfo(t *testing.T) {
	const text = `22 1 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
95 22 0:52 / /tmp/a\040b rw,nosuid,nodev,noatime shared:55 - fuse.agentfs agentfs:/root/.cache/agentfs/mounts/x\134y rw,user_id=0,group_id=0,default_permissions,allow_other
96 22 0:53 / /mnt/plain rw - fuse.loopback /src rw
garbage line
`
	ms := ParseMountInfo([]byte(text))
	if len(ms) != 3 {
		t.Fatalf("parsed %d mounts: %+v", len(ms), ms)
	}
	want := MountInfo{MountPoint: "/tmp/a b", FSType: "fuse.agentfs", Source: `agentfs:/root/.cache/agentfs/mounts/x\y`, Dev: "0:52"}
	if ms[1] != want {
		t.Errorf("got %+v, want %+v", ms[1], want)
	}
	for path, ok := range map[string]bool{"/tmp/a b": true, "/tmp/a b/c": true, "/tmp/a bc": false, "/tmp": false} {
		if within(path, "/tmp/a b") != ok {
			t.Errorf("within(%q) = %v", path, !ok)
		}
	}
	if !within("/anything", "/") {
		t.Errorf("everything is within /")
	}
}

func TestParseTuning(t *testing.T) {
	tu, err := ParseTuning("writeback=1, keepcache=0,dircache=0,maxwrite=131072,readahead=4096,background=12,readahead_kb=512,posixacl=1,flush=0,directwrite=1,passthrough=1")
	if err != nil {
		t.Fatal(err)
	}
	want := Tuning{Writeback: true, NoKeepCache: true, NoDirCache: true, MaxWrite: 131072, MaxReadAhead: 4096, MaxBackground: 12, ReadAheadKB: 512, PosixACL: true, NoFlush: true, DirectWrite: true, Passthrough: true}
	if tu != want {
		t.Errorf("got %+v, want %+v", tu, want)
	}
	if tu, err := ParseTuning(""); err != nil || tu != (Tuning{}) {
		t.Errorf("empty: %+v, %v", tu, err)
	}
	if d := (Tuning{}).withDefaults(); d.MaxWrite != maxWrite || d.MaxReadAhead != maxReadAhead || d.MaxBackground != maxBackground || d.ReadAheadKB != readAheadKB || d.Writeback {
		t.Errorf("defaults: %+v", d)
	}
	for _, bad := range []string{"writeback", "maxwrite=-1", "bogus=1", "readahead=x"} {
		if _, err := ParseTuning(bad); err == nil {
			t.Errorf("ParseTuning(%q) succeeded", bad)
		}
	}
}

// TestKilledMode: a caller the server cannot see (pid 0) counts by its
// uid and gid alone.
func TestKilledMode(t *testing.T) {
	user := &fuse.Caller{Owner: fuse.Owner{Uid: 1000, Gid: 5}}
	root := &fuse.Caller{}
	for _, c := range []struct {
		mode, gid uint32
		c         *fuse.Caller
		want      uint32
	}{
		{0o4755, 5, user, 0o755},
		{0o2755, 5, user, 0o755},
		{0o2745, 5, user, 0o2745}, // no S_IXGRP, caller in the group
		{0o2745, 7, user, 0o745},  // no S_IXGRP, caller not in the group
		{0o2745, 7, root, 0o2745}, // no S_IXGRP, caller capable
		{0o6711, 7, root, 0o711},
		{0o644, 7, user, 0o644},
		{0o1777, 7, user, 0o1777},
	} {
		got, changed := killedMode(cache.Attr{Mode: c.mode, Gid: c.gid}, c.c)
		if got != c.want || changed != (c.mode != c.want) {
			t.Errorf("killedMode(%#o, gid %d, caller %+v) = %#o, %v; want %#o", c.mode, c.gid, *c.c, got, changed, c.want)
		}
	}
}

func TestKnownXattrNamespace(t *testing.T) {
	for name, ok := range map[string]bool{"user.a": true, "trusted.x": true, "security.selinux": true, "system.posix_acl_access": true, "bogus.name": false, "user": false, "": false} {
		if knownXattrNamespace(name) != ok {
			t.Errorf("knownXattrNamespace(%q) = %v", name, !ok)
		}
	}
}
