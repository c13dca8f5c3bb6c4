package serve_test

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/agentfs/agentfs/serve/api"
)

func TestHistory(t *testing.T) {
	d := newDaemon(t, nil)
	w := d.create("ws")
	ctx := ctxT(t)
	if err := w.WriteFile(ctx, "a.txt", []byte("one\n")); err != nil {
		t.Fatal(err)
	}
	s1, err := w.SaveSnapshot(ctx, api.SaveSnapshot{Name: "s1", Message: "first"})
	if err != nil || s1.Name != "s1" || s1.Message != "first" || s1.Commit == "" {
		t.Fatalf("save %+v %v", s1, err)
	}
	_, err = w.SaveSnapshot(ctx, api.SaveSnapshot{Name: "s1"})
	wantCode(t, "save twice", err, "exists", 409)
	if err := w.WriteFile(ctx, "a.txt", []byte("two\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(ctx, "b.txt", []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	df, err := w.Diff(ctx, api.Diff{From: "s1", Patch: true})
	if err != nil || len(df.Changes) != 2 || df.Changes[0].Path != "a.txt" || df.Changes[0].Op != "modified" || df.Changes[1].Op != "added" || df.Changes[0].Patch == "" {
		t.Errorf("diff %+v %v", df, err)
	}
	_, err = w.Diff(ctx, api.Diff{From: "nope"})
	wantCode(t, "diff from a missing ref", err, "not_found", 404)

	// A fork from the snapshot and one from the head.
	f1, err := w.Fork(ctx, api.Fork{Name: "from-s1", Snapshot: "s1"})
	if err != nil || f1.Name != "from-s1" {
		t.Fatalf("fork %+v %v", f1, err)
	}
	if data, err := d.admin.Workspace("from-s1").ReadFile(ctx, "a.txt"); err != nil || string(data) != "one\n" {
		t.Errorf("fork of s1 reads %q %v", data, err)
	}
	if _, err := w.Fork(ctx, api.Fork{Name: "from-head"}); err != nil {
		t.Fatal(err)
	}
	if data, err := d.admin.Workspace("from-head").ReadFile(ctx, "b.txt"); err != nil || string(data) != "new\n" {
		t.Errorf("fork of the head reads %q %v", data, err)
	}
	br, err := w.Branches(ctx)
	var names []string
	for _, b := range br {
		names = append(names, b.Name)
	}
	sort.Strings(names)
	if err != nil || len(names) < 3 {
		t.Errorf("branches %v %v", names, err)
	}

	res, err := w.Restore(ctx, "s1", "back")
	if err != nil || res.Commit == "" || res.Saved == "" {
		t.Errorf("restore %+v %v", res, err)
	}
	if data, err := w.ReadFile(ctx, "a.txt"); err != nil || string(data) != "one\n" {
		t.Errorf("after restore %q %v", data, err)
	}
	if ok, _ := w.Exists(ctx, "b.txt"); ok {
		t.Error("b.txt survived the restore")
	}
	list, err := w.Snapshots(ctx, false)
	if err != nil || len(list) != 2 {
		t.Errorf("snapshots %+v %v", list, err)
	}
	if err := w.DeleteSnapshot(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "delete twice", w.DeleteSnapshot(ctx, "s1"), "not_found", 404)
	_, err = w.VirtualDiff(ctx, api.VirtualDiff{})
	wantCode(t, "virtual diff of a normal workspace", err, "invalid_argument", 400)
}

func TestVirtual(t *testing.T) {
	d := newDaemon(t, nil)
	ctx := ctxT(t)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "keep.txt"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "v", Virtual: true, Base: host}); err != nil {
		t.Fatal(err)
	}
	w := d.admin.Workspace("v")
	if err := w.WriteFile(ctx, "keep.txt", []byte("changed\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(ctx, "added.txt", []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	df, err := w.VirtualDiff(ctx, api.VirtualDiff{Patch: true})
	if err != nil || len(df.Changes) != 2 || df.Changes[0].Path != "added.txt" || df.Changes[0].Op != "added" ||
		df.Changes[1].Op != "modified" || df.Changes[1].Patch == "" || df.Changes[1].Added == nil || *df.Changes[1].Added != 1 {
		t.Fatalf("virtual diff %+v %v", df, err)
	}
	if data, _ := os.ReadFile(filepath.Join(host, "keep.txt")); string(data) != "base\n" {
		t.Errorf("the host directory changed: %q", data)
	}
	dr, err := w.VirtualDiscard(ctx, api.VirtualDiscard{Paths: []string{"keep.txt"}})
	if err != nil || len(dr.Discarded) != 1 || dr.Pending != 1 {
		t.Errorf("discard %+v %v", dr, err)
	}
	cr, err := w.VirtualCommit(ctx, api.VirtualCommit{Message: "accept"})
	if err != nil || len(cr.Changes) != 1 || cr.Pending != 0 {
		t.Errorf("commit %+v %v", cr, err)
	}
	if data, err := os.ReadFile(filepath.Join(host, "added.txt")); err != nil || string(data) != "x\n" {
		t.Errorf("committed to the host: %q %v", data, err)
	}
}

func TestTar(t *testing.T) {
	d := newDaemon(t, nil)
	w := d.create("ws")
	ctx := ctxT(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := map[string]string{"top.txt": "top\n", "dir/inner.bin": "\x00\xff\x01"}
	for _, name := range []string{"dir/inner.bin", "top.txt"} {
		if name == "dir/inner.bin" {
			_ = tw.WriteHeader(&tar.Header{Name: "dir/", Typeflag: tar.TypeDir, Mode: 0o755})
		}
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o640, Size: int64(len(files[name]))})
		_, _ = tw.Write([]byte(files[name]))
	}
	_ = tw.WriteHeader(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "top.txt"})
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ch, err := w.UploadTar(ctx, "up/load", &buf)
	if err != nil || ch == nil || len(ch.Created) < 4 {
		t.Fatalf("upload: %+v %v", ch, err)
	}
	if data, err := w.ReadFile(ctx, "up/load/dir/inner.bin"); err != nil || string(data) != files["dir/inner.bin"] {
		t.Errorf("extracted %q %v", data, err)
	}
	if fi, err := w.Stat(ctx, "up/load/link"); err != nil || fi.Type != "symlink" {
		t.Errorf("link %+v %v", fi, err)
	}
	rc, err := w.DownloadTar(ctx, "up/load")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[h.Name] = string(data)
	}
	if got["./top.txt"] != "top\n" || got["./dir/inner.bin"] != files["dir/inner.bin"] {
		t.Errorf("downloaded %q", got)
	}
	_, err = w.DownloadTar(ctx, "missing")
	wantCode(t, "tar of a missing dir", err, "not_found", 404)
	_, err = w.UploadTar(ctx, "x", bytes.NewReader([]byte("not a tar")))
	wantCode(t, "bad tar", err, "invalid_argument", 400)
}
