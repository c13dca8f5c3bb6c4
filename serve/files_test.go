package serve_test

import (
	"testing"

	"github.com/agentfs/agentfs/serve/api"
)

func TestFiles(t *testing.T) {
	d := newDaemon(t, nil)
	w := d.create("ws")
	ctx := ctxT(t)
	text := "alpha\nbeta\ngamma\ndelta\n"
	if err := w.WriteFile(ctx, "src/deep/a.txt", []byte(text)); err != nil {
		t.Fatal(err)
	}
	if data, err := w.ReadFile(ctx, "src/deep/a.txt"); err != nil || string(data) != text {
		t.Errorf("read %q %v", data, err)
	}
	r, err := w.Read(ctx, "src/deep/a.txt", 1, 2)
	if err != nil || r.Content != "     2\tbeta\n     3\tgamma\n" || r.TotalLines != 4 || r.Lines != 2 || r.Offset != 1 {
		t.Errorf("numbered %+v %v", r, err)
	}
	if r, err = w.Read(ctx, "src/deep/a.txt", 0, 0); err != nil || r.Lines != 4 {
		t.Errorf("numbered all %+v %v", r, err)
	}
	_, err = w.Read(ctx, "src/deep/a.txt", 9, 0)
	wantCode(t, "offset past the end", err, "out_of_range", 400)
	_, err = w.ReadFile(ctx, "nope")
	wantCode(t, "read missing", err, "not_found", 404)
	_, err = w.ReadFile(ctx, "src")
	wantCode(t, "read a directory", err, "is_a_directory", 400)

	fi, err := w.Stat(ctx, "src/deep/a.txt")
	if err != nil || fi.Type != "file" || fi.Size != int64(len(text)) || fi.Mode != 0o644 || fi.Name != "a.txt" {
		t.Errorf("stat %+v %v", fi, err)
	}
	if ok, err := w.Exists(ctx, "src/deep"); !ok || err != nil {
		t.Errorf("exists %v %v", ok, err)
	}
	if ok, err := w.Exists(ctx, "src/none"); ok || err != nil {
		t.Errorf("exists missing %v %v", ok, err)
	}

	n, err := w.Edit(ctx, api.Edit{Path: "src/deep/a.txt", Old: "beta", New: "BETA"})
	if err != nil || n != 1 {
		t.Errorf("edit %d %v", n, err)
	}
	if err := w.WriteFile(ctx, "dup.txt", []byte("x x x")); err != nil {
		t.Fatal(err)
	}
	_, err = w.Edit(ctx, api.Edit{Path: "dup.txt", Old: "x", New: "y"})
	wantCode(t, "edit not unique", err, "not_unique", 409)
	_, err = w.Edit(ctx, api.Edit{Path: "dup.txt", Old: "zzz", New: "y"})
	wantCode(t, "edit no match", err, "no_match", 404)
	if n, err = w.Edit(ctx, api.Edit{Path: "dup.txt", Old: "x", New: "y", ReplaceAll: true}); err != nil || n != 3 {
		t.Errorf("replace all %d %v", n, err)
	}

	if err := w.Mkdir(ctx, "m/n/o", true); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "mkdir exists", w.Mkdir(ctx, "m", false), "exists", 409)
	wantCode(t, "mkdir no parent", w.Mkdir(ctx, "p/q", false), "not_found", 404)
	if err := w.Copy(ctx, "dup.txt", "m/copy.txt"); err != nil {
		t.Fatal(err)
	}
	if err := w.Rename(ctx, "m/copy.txt", "m/n/moved.txt"); err != nil {
		t.Fatal(err)
	}
	l, err := w.List(ctx, "m", true)
	var paths []string
	for _, e := range l.Entries {
		paths = append(paths, e.Path+":"+e.Type)
	}
	if err != nil || len(paths) != 3 || paths[0] != "m/n:dir" || paths[1] != "m/n/moved.txt:file" || paths[2] != "m/n/o:dir" {
		t.Errorf("list recursive %v %v", paths, err)
	}
	if l, err = w.List(ctx, "", false); err != nil || len(l.Entries) != 3 {
		t.Errorf("list root %+v %v", l, err)
	}

	g, err := w.Glob(ctx, api.Glob{Pattern: "**/*.txt"})
	if err != nil || len(g) != 3 || g[0] != "dup.txt" {
		t.Errorf("glob %v %v", g, err)
	}
	if g, err = w.Glob(ctx, api.Glob{Pattern: "*.txt", Path: "m/n"}); err != nil || len(g) != 1 || g[0] != "m/n/moved.txt" {
		t.Errorf("glob with a base %v %v", g, err)
	}
	gr, err := w.Grep(ctx, api.Grep{Pattern: "gam+a", Path: "src"})
	if err != nil || len(gr.Matches) != 1 || gr.Matches[0] != (api.GrepMatch{Path: "src/deep/a.txt", Line: 3, Text: "gamma"}) {
		t.Errorf("grep %+v %v", gr, err)
	}
	if gr, err = w.Grep(ctx, api.Grep{Pattern: "Y", IgnoreCase: true, Literal: true, Glob: "*.txt", MaxResults: 1}); err != nil || len(gr.Matches) != 1 || !gr.Truncated {
		t.Errorf("grep capped %+v %v", gr, err)
	}
	_, err = w.Grep(ctx, api.Grep{Pattern: "("})
	wantCode(t, "grep bad pattern", err, "invalid_argument", 400)

	wantCode(t, "remove non-empty", w.Remove(ctx, "m", false), "not_empty", 409)
	if err := w.Remove(ctx, "m", true); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "remove missing", w.Remove(ctx, "m", false), "not_found", 404)
	wantCode(t, "remove root", w.Remove(ctx, ".", true), "invalid_argument", 400)

	// A command sees what the API wrote, and the API what it wrote.
	res, err := w.Exec(ctx, api.ExecRequest{Command: "cat dup.txt; printf new > made.txt"})
	if err != nil || res.Stdout != "y y y" {
		t.Errorf("exec sees %+v %v", res, err)
	}
	if data, err := w.ReadFile(ctx, "made.txt"); err != nil || string(data) != "new" {
		t.Errorf("API sees %q %v", data, err)
	}
}
