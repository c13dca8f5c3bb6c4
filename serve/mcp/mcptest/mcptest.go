// Package mcptest is the conformance suite of the agentfs MCP tools: given a
// client session connected to a server of serve/mcp (over stdio, HTTP or
// anything else), it lists the tools and calls each one, errors included,
// and checks the workspace's files on this host. The tests of serve/mcp and
// cmd/agentfs run it over every transport.
package mcptest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/serve/apierr"
	"github.com/agentfs/agentfs/serve/mcp"
)

// Tools are the names every server lists.
var Tools = []string{
	"read_file", "write_file", "edit_file", "list_directory", "glob", "grep",
	"execute", "background_start", "background_list", "background_output", "background_kill",
	"snapshot_save", "snapshot_list", "snapshot_restore", "diff", "commit", "discard",
}

// Call calls a tool and returns its result; a protocol error fails the
// test.
func Call(t testing.TB, s *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

// Text is the text content of a result.
func Text(res *sdk.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

// Must calls a tool that must succeed and decodes its structured content
// into out (nil: not decoded).
func Must(t testing.TB, s *sdk.ClientSession, name string, args map[string]any, out any) *sdk.CallToolResult {
	t.Helper()
	res := Call(t, s, name, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", name, args, Text(res))
	}
	if out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

// Fails calls a tool that must fail with the error code and returns the
// error.
func Fails(t testing.TB, s *sdk.ClientSession, code, name string, args map[string]any) apierr.Error {
	t.Helper()
	res := Call(t, s, name, args)
	if !res.IsError {
		t.Fatalf("%s %v succeeded, want error %s: %s", name, args, code, Text(res))
	}
	var body struct{ Error apierr.Error }
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &body); err != nil || string(body.Error.Code) != code {
		t.Fatalf("%s %v: error %s (%v), want code %s", name, args, b, err, code)
	}
	if !strings.HasPrefix(Text(res), code+": ") {
		t.Errorf("%s %v: error text %q does not start with %q", name, args, Text(res), code+": ")
	}
	return body.Error
}

// ListTools checks that the server lists every tool of Tools, each with a
// description and an object input schema.
func ListTools(t *testing.T, s *sdk.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var names []string
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		if len(tool.Description) < 40 || !strings.Contains(string(schema), `"type":"object"`) {
			t.Errorf("tool %s: description %q, input schema %s", tool.Name, tool.Description, schema)
		}
	}
	for _, want := range Tools {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s is not listed (tools: %v)", want, names)
		}
	}
}

// Run calls every tool but commit and discard's successes through s, on a
// workspace that is an agentfs mount (not virtual) at dir on this host, and
// checks what they did to dir. It writes under dir and saves snapshots
// named mcp-*.
func Run(t *testing.T, s *sdk.ClientSession, dir string) {
	t.Run("ListTools", func(t *testing.T) { ListTools(t, s) })
	t.Run("Files", func(t *testing.T) { files(t, s, dir) })
	t.Run("Execute", func(t *testing.T) { execute(t, s, dir) })
	t.Run("Background", func(t *testing.T) { background(t, s) })
	t.Run("History", func(t *testing.T) { history(t, s, dir) })
}

func readDisk(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func files(t *testing.T, s *sdk.ClientSession, dir string) {
	var w mcp.WriteFileOutput
	Must(t, s, "write_file", map[string]any{"path": "f/a.txt", "content": "one\ntwo\nthree\n"}, &w)
	if w.Bytes != 14 || readDisk(t, filepath.Join(dir, "f/a.txt")) != "one\ntwo\nthree\n" {
		t.Errorf("write_file: %+v, on disk %q", w, readDisk(t, filepath.Join(dir, "f/a.txt")))
	}

	var r mcp.ReadFileOutput
	res := Must(t, s, "read_file", map[string]any{"path": "f/a.txt"}, &r)
	if want := "     1\tone\n     2\ttwo\n     3\tthree\n"; r.Content != want || Text(res) != want || r.Lines != 3 || r.NextOffset != 0 {
		t.Errorf("read_file: %+v, text %q", r, Text(res))
	}
	res = Must(t, s, "read_file", map[string]any{"path": "f/a.txt", "offset": 1, "limit": 1}, &r)
	if r.Content != "     2\ttwo\n" || r.NextOffset != 2 || !strings.Contains(Text(res), "offset=2") {
		t.Errorf("read_file offset 1 limit 1: %+v, text %q", r, Text(res))
	}
	Fails(t, s, "not_found", "read_file", map[string]any{"path": "f/missing.txt"})
	if e := Fails(t, s, "path_escape", "read_file", map[string]any{"path": "../outside"}); e.Path != "../outside" {
		t.Errorf("path_escape error names path %q", e.Path)
	}
	Fails(t, s, "path_escape", "read_file", map[string]any{"path": "/etc/passwd"})
	Fails(t, s, "out_of_range", "read_file", map[string]any{"path": "f/a.txt", "offset": 10})
	Fails(t, s, "invalid_argument", "read_file", map[string]any{"offset": 1}) // no path: schema validation
	if err := os.Symlink("/etc", filepath.Join(dir, "f", "out")); err != nil {
		t.Fatal(err)
	}
	Fails(t, s, "path_escape", "read_file", map[string]any{"path": "f/out/passwd"})
	Fails(t, s, "path_escape", "write_file", map[string]any{"path": "f/out/x", "content": "x"})

	bin := []byte{0, 1, 2, 255}
	Must(t, s, "write_file", map[string]any{"path": "f/bin", "content": base64.StdEncoding.EncodeToString(bin), "encoding": "base64"}, nil)
	Must(t, s, "read_file", map[string]any{"path": "f/bin", "encoding": "base64"}, &r)
	if got, _ := base64.StdEncoding.DecodeString(r.Content); string(got) != string(bin) {
		t.Errorf("base64 round trip: %q", got)
	}
	Fails(t, s, "binary_file", "read_file", map[string]any{"path": "f/bin"})
	Fails(t, s, "is_a_directory", "write_file", map[string]any{"path": "f", "content": "x"})

	var e mcp.EditFileOutput
	Must(t, s, "edit_file", map[string]any{"path": "f/a.txt", "old_string": "two\n", "new_string": "2\n"}, &e)
	if e.Replacements != 1 || readDisk(t, filepath.Join(dir, "f/a.txt")) != "one\n2\nthree\n" {
		t.Errorf("edit_file: %+v", e)
	}
	Fails(t, s, "no_match", "edit_file", map[string]any{"path": "f/a.txt", "old_string": "two", "new_string": "x"})
	Must(t, s, "write_file", map[string]any{"path": "f/b.txt", "content": "x x x\n"}, nil)
	Fails(t, s, "not_unique", "edit_file", map[string]any{"path": "f/b.txt", "old_string": "x", "new_string": "y"})
	Must(t, s, "edit_file", map[string]any{"path": "f/b.txt", "old_string": "x", "new_string": "y", "replace_all": true}, &e)
	if e.Replacements != 3 || readDisk(t, filepath.Join(dir, "f/b.txt")) != "y y y\n" {
		t.Errorf("edit_file replace_all: %+v", e)
	}

	var l mcp.ListDirectoryOutput
	Must(t, s, "list_directory", map[string]any{"path": "f"}, &l)
	var got []string
	for _, en := range l.Entries {
		got = append(got, en.Path+":"+en.Type)
	}
	if want := "f/a.txt:file f/b.txt:file f/bin:file f/out:symlink"; strings.Join(got, " ") != want {
		t.Errorf("list_directory f: %v, want %s", got, want)
	}
	Must(t, s, "list_directory", map[string]any{}, &l)
	if len(l.Entries) == 0 {
		t.Error("list_directory of the root is empty")
	}
	Fails(t, s, "not_found", "list_directory", map[string]any{"path": "nope"})
	Fails(t, s, "not_a_directory", "list_directory", map[string]any{"path": "f/a.txt"})
	Fails(t, s, "path_escape", "list_directory", map[string]any{"path": ".."})

	var g mcp.GlobOutput
	Must(t, s, "glob", map[string]any{"pattern": "**/*.txt"}, &g)
	if !slices.Contains(g.Matches, "f/a.txt") || !slices.Contains(g.Matches, "f/b.txt") {
		t.Errorf("glob **/*.txt: %v", g.Matches)
	}
	Must(t, s, "glob", map[string]any{"pattern": "*.txt", "path": "f"}, &g)
	if strings.Join(g.Matches, " ") != "f/a.txt f/b.txt" {
		t.Errorf("glob *.txt in f: %v", g.Matches)
	}
	Fails(t, s, "path_escape", "glob", map[string]any{"pattern": "../*"})
	Fails(t, s, "not_found", "glob", map[string]any{"pattern": "*", "path": "nope"})

	var gr mcp.GrepOutput
	res = Must(t, s, "grep", map[string]any{"pattern": "^(one|y y)", "path": "f"}, &gr)
	if len(gr.Matches) != 2 || gr.Matches[0] != (mcp.GrepMatch{Path: "f/a.txt", Line: 1, Text: "one"}) ||
		!strings.Contains(Text(res), "f/b.txt:1:y y y") {
		t.Errorf("grep: %+v, text %q", gr, Text(res))
	}
	Must(t, s, "grep", map[string]any{"pattern": "E", "ignore_case": true, "glob": "a.*", "max_results": 1}, &gr)
	if len(gr.Matches) != 1 || gr.Matches[0].Text != "one" || !gr.Truncated {
		t.Errorf("grep max_results 1: %+v", gr)
	}
	Fails(t, s, "invalid_argument", "grep", map[string]any{"pattern": "("})
	Fails(t, s, "path_escape", "grep", map[string]any{"pattern": "x", "path": "../"})
}

func execute(t *testing.T, s *sdk.ClientSession, dir string) {
	var x mcp.ExecuteOutput
	res := Must(t, s, "execute", map[string]any{"command": "echo out; echo err >&2; echo new > made.txt; pwd"}, &x)
	if x.ExitCode != 0 || !strings.Contains(x.Output, "out\n") || !strings.Contains(x.Output, "err\n") ||
		!strings.Contains(Text(res), "[exit code 0") {
		t.Errorf("execute: %+v, text %q", x, Text(res))
	}
	if x.Changes == nil || !slices.Contains(x.Changes.Created, "made.txt") {
		t.Errorf("execute changes: %+v", x.Changes)
	}
	if readDisk(t, filepath.Join(dir, "made.txt")) != "new\n" {
		t.Error("made.txt is not on disk")
	}
	Must(t, s, "execute", map[string]any{"command": "cat; exit 3", "stdin": "in", "cwd": "f", "env": map[string]string{"A": "1"}}, &x)
	if x.ExitCode != 3 || x.Output != "in" {
		t.Errorf("execute exit 3: %+v", x)
	}
	Must(t, s, "execute", map[string]any{"command": "echo $A; pwd", "cwd": "f", "env": map[string]string{"A": "1"}}, &x)
	if !strings.HasPrefix(x.Output, "1\n") || !strings.HasSuffix(strings.TrimSpace(x.Output), "/f") {
		t.Errorf("execute env and cwd: %q", x.Output)
	}
	start := time.Now()
	e := Fails(t, s, "timeout", "execute", map[string]any{"command": "echo before; sleep 30", "timeout": 0.5})
	if d := time.Since(start); d > 15*time.Second || !strings.Contains(e.Message, "before") {
		t.Errorf("timeout after %v: %q", d, e.Message)
	}
	Fails(t, s, "path_escape", "execute", map[string]any{"command": "true", "cwd": "../"})
	Fails(t, s, "not_found", "execute", map[string]any{"command": "true", "cwd": "nope"})
	Fails(t, s, "invalid_argument", "execute", map[string]any{"command": ""})
	Fails(t, s, "invalid_argument", "execute", map[string]any{"command": "true", "timeout": -1})
}

func background(t *testing.T, s *sdk.ClientSession) {
	var j mcp.JobStatus
	Must(t, s, "background_start", map[string]any{"command": "echo started; sleep 60"}, &j)
	if j.JobID == "" || !j.Running {
		t.Fatalf("background_start: %+v", j)
	}
	var o mcp.BackgroundOutputOutput
	deadline := time.Now().Add(30 * time.Second)
	for o.Output == "" && time.Now().Before(deadline) {
		Must(t, s, "background_output", map[string]any{"job_id": j.JobID}, &o)
		time.Sleep(50 * time.Millisecond)
	}
	if !o.Running || o.Output != "started\n" || o.NextOffset != 8 || o.ExitCode != nil {
		t.Errorf("background_output of a running job: %+v", o)
	}
	var l mcp.BackgroundListOutput
	Must(t, s, "background_list", nil, &l)
	if len(l.Jobs) == 0 || l.Jobs[len(l.Jobs)-1].JobID != j.JobID {
		t.Errorf("background_list: %+v", l)
	}
	Must(t, s, "background_kill", map[string]any{"job_id": j.JobID}, &o)
	if o.Running || o.ExitCode == nil || *o.ExitCode != 137 {
		t.Errorf("background_kill: %+v", o)
	}

	Must(t, s, "background_start", map[string]any{"command": "echo one; echo two"}, &j)
	Must(t, s, "background_output", map[string]any{"job_id": j.JobID, "wait": 30}, &o)
	if o.Running || o.ExitCode == nil || *o.ExitCode != 0 || o.Output != "one\ntwo\n" {
		t.Errorf("background_output wait: %+v", o)
	}
	Must(t, s, "background_output", map[string]any{"job_id": j.JobID, "offset": 4}, &o)
	if o.Output != "two\n" || o.NextOffset != 8 {
		t.Errorf("background_output offset 4: %+v", o)
	}
	Fails(t, s, "invalid_argument", "background_output", map[string]any{"job_id": j.JobID, "offset": 9})
	Fails(t, s, "not_found", "background_output", map[string]any{"job_id": "job-999"})
	Fails(t, s, "not_found", "background_kill", map[string]any{"job_id": "job-999"})
	Fails(t, s, "path_escape", "background_start", map[string]any{"command": "true", "cwd": "/"})
}

func history(t *testing.T, s *sdk.ClientSession, dir string) {
	Must(t, s, "write_file", map[string]any{"path": "h.txt", "content": "before\n"}, nil)
	var snap mcp.Snapshot
	Must(t, s, "snapshot_save", map[string]any{"name": "mcp-s1", "message": "before the change"}, &snap)
	if snap.Name != "mcp-s1" || snap.Commit == "" {
		t.Errorf("snapshot_save: %+v", snap)
	}
	Fails(t, s, "exists", "snapshot_save", map[string]any{"name": "mcp-s1"})
	Fails(t, s, "invalid_argument", "snapshot_save", map[string]any{"name": "bad name/"})
	var l mcp.SnapshotListOutput
	Must(t, s, "snapshot_list", nil, &l)
	if !slices.ContainsFunc(l.Snapshots, func(s mcp.Snapshot) bool { return s.Name == "mcp-s1" && s.Message == "before the change" }) {
		t.Errorf("snapshot_list: %+v", l)
	}

	Must(t, s, "write_file", map[string]any{"path": "h.txt", "content": "after\n"}, nil)
	Must(t, s, "write_file", map[string]any{"path": "h2.txt", "content": "new\n"}, nil)
	var d mcp.DiffOutput
	Must(t, s, "diff", map[string]any{"from": "mcp-s1", "patch": true}, &d)
	var got []string
	for _, c := range d.Changes {
		if c.Path == "h.txt" || c.Path == "h2.txt" {
			got = append(got, c.Op+" "+c.Path)
			if c.Path == "h.txt" && !strings.Contains(c.Patch, "+after") {
				t.Errorf("diff patch of h.txt: %q", c.Patch)
			}
		}
	}
	if strings.Join(got, ",") != "modified h.txt,added h2.txt" {
		t.Errorf("diff from mcp-s1: %+v", d)
	}
	Must(t, s, "diff", map[string]any{"from": "mcp-s1", "paths": []string{"h2.txt"}}, &d)
	if len(d.Changes) != 1 || d.Changes[0].Path != "h2.txt" {
		t.Errorf("diff paths h2.txt: %+v", d)
	}
	Fails(t, s, "invalid_argument", "diff", nil)
	Fails(t, s, "not_found", "diff", map[string]any{"from": "mcp-nope"})
	Fails(t, s, "invalid_argument", "commit", nil)
	Fails(t, s, "invalid_argument", "discard", nil)

	var rr mcp.SnapshotRestoreOutput
	Must(t, s, "snapshot_restore", map[string]any{"name": "mcp-s1"}, &rr)
	if rr.Restored != "mcp-s1" || rr.SavedAs == "" || rr.Commit == "" {
		t.Errorf("snapshot_restore: %+v", rr)
	}
	if got := readDisk(t, filepath.Join(dir, "h.txt")); got != "before\n" {
		t.Errorf("h.txt after restore: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "h2.txt")); !os.IsNotExist(err) {
		t.Errorf("h2.txt after restore: %v", err)
	}
	Fails(t, s, "not_found", "snapshot_restore", map[string]any{"name": "mcp-nope"})
}

// RunVirtual calls diff, commit and discard through s on a virtual
// workspace over the host directory host, whose root is dir on this host.
func RunVirtual(t *testing.T, s *sdk.ClientSession, dir, host string) {
	Must(t, s, "write_file", map[string]any{"path": "keep.txt", "content": "keep\n"}, nil)
	Must(t, s, "write_file", map[string]any{"path": "drop.txt", "content": "drop\n"}, nil)
	var d mcp.DiffOutput
	Must(t, s, "diff", nil, &d)
	var got []string
	for _, c := range d.Changes {
		got = append(got, c.Op+" "+c.Path)
	}
	if strings.Join(got, ",") != "added drop.txt,added keep.txt" {
		t.Errorf("diff of the virtual workspace: %+v", d)
	}
	var dc mcp.DiscardOutput
	Must(t, s, "discard", map[string]any{"paths": []string{"drop.txt"}}, &dc)
	if len(dc.Discarded) != 1 || dc.Discarded[0].Path != "drop.txt" || dc.Pending != 1 {
		t.Errorf("discard drop.txt: %+v", dc)
	}
	if _, err := os.Stat(filepath.Join(dir, "drop.txt")); !os.IsNotExist(err) {
		t.Errorf("drop.txt after discard: %v", err)
	}
	var c mcp.CommitOutput
	Must(t, s, "commit", map[string]any{"message": "from mcp"}, &c)
	if len(c.Changes) != 1 || c.Changes[0].Path != "keep.txt" || c.Pending != 0 {
		t.Errorf("commit: %+v", c)
	}
	if got := readDisk(t, filepath.Join(host, "keep.txt")); got != "keep\n" {
		t.Errorf("keep.txt in the host directory after commit: %q", got)
	}
}
