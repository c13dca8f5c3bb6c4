package mcp

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/exec"
)

// The file tools: read_file, write_file, edit_file, list_directory, glob,
// grep.

const (
	encodingText   = "text"
	encodingBase64 = "base64"
	// defaultGrepMatches is grep's max_results: enough for a model to
	// narrow down, small enough for its context.
	defaultGrepMatches = 100
)

// ReadFileInput are read_file's arguments.
type ReadFileInput struct {
	Path     string `json:"path" jsonschema:"file to read, relative to the workspace root"`
	Offset   int    `json:"offset,omitempty" jsonschema:"number of lines to skip (0 starts at line 1); to continue a read use the next_offset it returned"`
	Limit    int    `json:"limit,omitempty" jsonschema:"maximum number of lines to return (default 2000)"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default): numbered lines; base64: the whole file's bytes, base64-encoded (for binary files; offset and limit are ignored)"`
}

func (in ReadFileInput) errPath() string { return in.Path }

// ReadFileOutput is read_file's result.
type ReadFileOutput struct {
	Path string `json:"path"`
	// Content is the lines as "     N\tLINE\n" (N is the 1-based line
	// number, right-aligned in six columns), or the base64 bytes.
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
	// Lines is the number of lines returned (text only).
	Lines int `json:"lines"`
	// NextOffset is the offset that continues the read when the file has
	// more lines past the limit; 0 when the read reached the end.
	NextOffset int `json:"next_offset,omitempty"`
}

func (o ReadFileOutput) text() string {
	if o.NextOffset > 0 {
		return o.Content + fmt.Sprintf("(more lines follow: call read_file with offset=%d to continue)\n", o.NextOffset)
	}
	if o.Content == "" && o.Encoding == encodingText {
		return "(empty file)\n"
	}
	return o.Content
}

var readFileTool = &sdk.Tool{
	Name:  "read_file",
	Title: "Read a file",
	Description: `Read a text file of the workspace as numbered lines ("     N\tLINE", N starting at 1, as cat -n), at most limit lines (default 2000) after skipping offset lines. When the file has more lines, next_offset says where to continue. An empty file reads as no lines.
Errors: not_found (no such file), is_a_directory, path_escape (the path leaves the workspace), out_of_range (offset past the end: the message gives the line count), binary_file (a binary file: read it with encoding "base64").`,
	InputSchema: inputSchema[ReadFileInput](map[string]any{"offset": 0, "limit": exec.DefaultReadLimit, "encoding": encodingText}),
	Annotations: readOnly,
}

func readFile(ctx context.Context, c *call, in ReadFileInput) (ReadFileOutput, error) {
	out := ReadFileOutput{Path: in.Path, Encoding: in.Encoding}
	switch in.Encoding {
	case encodingBase64:
		data, err := c.Backend.ReadFile(ctx, in.Path)
		out.Content = base64.StdEncoding.EncodeToString(data)
		return out, err
	case encodingText, "":
		out.Encoding = encodingText
	default:
		return out, fmt.Errorf("encoding %q: %w: want text or base64", in.Encoding, exec.ErrInvalid)
	}
	limit := in.Limit
	if limit <= 0 {
		limit = exec.DefaultReadLimit
	}
	// One line more than asked tells whether the file goes on.
	text, err := c.Backend.Read(ctx, in.Path, in.Offset, limit+1)
	if err != nil {
		return out, err
	}
	lines := strings.SplitAfter(text, "\n")
	lines = lines[:len(lines)-1] // after the last newline
	if len(lines) > limit {
		lines = lines[:limit]
		out.NextOffset = in.Offset + limit
	}
	out.Content = strings.Join(lines, "")
	out.Lines = len(lines)
	return out, nil
}

// WriteFileInput are write_file's arguments.
type WriteFileInput struct {
	Path     string `json:"path" jsonschema:"file to write, relative to the workspace root; missing parent directories are created"`
	Content  string `json:"content" jsonschema:"the file's new content, in full"`
	Encoding string `json:"encoding,omitempty" jsonschema:"text (default): content is written as is (UTF-8); base64: content is base64 and its decoded bytes are written"`
}

func (in WriteFileInput) errPath() string { return in.Path }

// WriteFileOutput is write_file's result.
type WriteFileOutput struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

var writeFileTool = &sdk.Tool{
	Name:  "write_file",
	Title: "Write a file",
	Description: `Create or overwrite a file of the workspace with content, creating missing parent directories. Replaces the whole file: to change part of a file, use edit_file.
Errors: path_escape, is_a_directory (the path is a directory), not_a_directory (a parent is a file), invalid_argument (bad base64).`,
	InputSchema: inputSchema[WriteFileInput](map[string]any{"encoding": encodingText}),
	Annotations: writes,
}

func writeFile(ctx context.Context, c *call, in WriteFileInput) (WriteFileOutput, error) {
	data := []byte(in.Content)
	switch in.Encoding {
	case encodingBase64:
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.Content); err != nil {
			return WriteFileOutput{}, fmt.Errorf("write %q: %w: content is not base64: %w", in.Path, exec.ErrInvalid, err)
		}
	case encodingText, "":
	default:
		return WriteFileOutput{}, fmt.Errorf("encoding %q: %w: want text or base64", in.Encoding, exec.ErrInvalid)
	}
	if err := c.Backend.WriteFile(ctx, in.Path, data); err != nil {
		return WriteFileOutput{}, err
	}
	return WriteFileOutput{Path: in.Path, Bytes: len(data)}, nil
}

// EditFileInput are edit_file's arguments.
type EditFileInput struct {
	Path       string `json:"path" jsonschema:"text file to edit, relative to the workspace root"`
	OldString  string `json:"old_string" jsonschema:"exact text to replace (not empty; whitespace and indentation included, without read_file's line numbers)"`
	NewString  string `json:"new_string" jsonschema:"text to put in its place (may be empty, to delete)"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence; without it (default false) old_string must occur exactly once"`
}

func (in EditFileInput) errPath() string { return in.Path }

// EditFileOutput is edit_file's result.
type EditFileOutput struct {
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
}

var editFileTool = &sdk.Tool{
	Name:  "edit_file",
	Title: "Edit a file",
	Description: `Replace old_string with new_string in a text file of the workspace and return the number of replacements. old_string must occur exactly once unless replace_all is true; otherwise nothing changes and the call fails.
Errors: not_found (no such file), no_match (old_string does not occur: read the file again and copy the text exactly), not_unique (old_string occurs several times: add surrounding lines to make it unique, or set replace_all), invalid_argument (empty old_string), binary_file, path_escape.`,
	InputSchema: inputSchema[EditFileInput](map[string]any{"replace_all": false}),
	Annotations: destructive,
}

func editFile(ctx context.Context, c *call, in EditFileInput) (EditFileOutput, error) {
	n, err := c.Backend.Edit(ctx, in.Path, in.OldString, in.NewString, in.ReplaceAll)
	return EditFileOutput{Path: in.Path, Replacements: n}, err
}

// ListDirectoryInput are list_directory's arguments.
type ListDirectoryInput struct {
	Path string `json:"path,omitempty" jsonschema:"directory to list, relative to the workspace root (default: the root)"`
}

func (in ListDirectoryInput) errPath() string { return in.Path }

// Entry is one directory entry.
type Entry struct {
	Name string `json:"name"`
	// Path is relative to the workspace root.
	Path string `json:"path"`
	// Type is file, dir, symlink or other.
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"` // octal permission bits, e.g. "0644"
	ModTime time.Time `json:"mod_time"`
}

// ListDirectoryOutput is list_directory's result.
type ListDirectoryOutput struct {
	Path    string  `json:"path"`
	Entries []Entry `json:"entries"`
}

var listDirectoryTool = &sdk.Tool{
	Name:  "list_directory",
	Title: "List a directory",
	Description: `List the entries of a directory of the workspace, sorted by name: name, path (relative to the workspace root), type (file, dir, symlink, other), size in bytes, mode and modification time. Symlinks are listed, not followed. Not recursive: use glob with "**" for a whole tree.
Errors: not_found, not_a_directory, path_escape.`,
	InputSchema: inputSchema[ListDirectoryInput](map[string]any{"path": ""}),
	Annotations: readOnly,
}

func listDirectory(ctx context.Context, c *call, in ListDirectoryInput) (ListDirectoryOutput, error) {
	infos, err := c.Backend.List(ctx, in.Path)
	if err != nil {
		return ListDirectoryOutput{}, err
	}
	out := ListDirectoryOutput{Path: in.Path, Entries: make([]Entry, 0, len(infos))}
	for _, fi := range infos {
		out.Entries = append(out.Entries, Entry{Name: fi.Name, Path: fi.Path, Type: fi.Type.String(),
			Size: fi.Size, Mode: fmt.Sprintf("%04o", fi.Mode.Perm()), ModTime: fi.ModTime.UTC()})
	}
	return out, nil
}

// GlobInput are glob's arguments.
type GlobInput struct {
	Pattern string `json:"pattern" jsonschema:"slash-separated pattern relative to path: * ? [...] match within one path segment, ** matches any number of directories (\"**/*.go\" finds every .go file)"`
	Path    string `json:"path,omitempty" jsonschema:"directory to search from, relative to the workspace root (default: the root)"`
}

func (in GlobInput) errPath() string { return in.Path }

// GlobOutput is glob's result.
type GlobOutput struct {
	// Matches are relative to the workspace root, sorted.
	Matches []string `json:"matches"`
}

func (o GlobOutput) text() string {
	if len(o.Matches) == 0 {
		return "(no matches)\n"
	}
	return strings.Join(o.Matches, "\n") + "\n"
}

var globTool = &sdk.Tool{
	Name:  "glob",
	Title: "Find files by name",
	Description: `Find the paths under a directory of the workspace that match a glob pattern, sorted, relative to the workspace root. Hidden files match like any other; symlinks are matched, not followed.
Errors: invalid_argument (empty or malformed pattern), not_found (path does not exist), path_escape (path or pattern leaves the workspace).`,
	InputSchema: inputSchema[GlobInput](map[string]any{"path": ""}),
	Annotations: readOnly,
}

func glob(ctx context.Context, c *call, in GlobInput) (GlobOutput, error) {
	b, prefix, err := scoped(c.Backend, in.Path)
	if err != nil {
		return GlobOutput{}, err
	}
	matches, err := b.Glob(ctx, in.Pattern)
	if err != nil {
		return GlobOutput{}, err
	}
	out := GlobOutput{Matches: make([]string, 0, len(matches))}
	for _, m := range matches {
		out.Matches = append(out.Matches, path.Join(prefix, m))
	}
	return out, nil
}

// scoped returns the backend confined to the directory p (the backend
// itself for the root) and p's clean form ("" for the root).
func scoped(b *exec.Backend, p string) (*exec.Backend, string, error) {
	if p == "" || path.Clean(p) == "." {
		return b, "", nil
	}
	s, err := b.Scope(p)
	return s, path.Clean(p), err
}

// GrepInput are grep's arguments.
type GrepInput struct {
	Pattern    string `json:"pattern" jsonschema:"regular expression (Go RE2 syntax) searched line by line, or a plain string with literal"`
	Path       string `json:"path,omitempty" jsonschema:"file or directory to search, relative to the workspace root (default: the root)"`
	Glob       string `json:"glob,omitempty" jsonschema:"search only files matching this glob; without a slash it is matched against the file name (\"*.py\"), with one against the path from the root (\"src/**/*.go\")"`
	Literal    bool   `json:"literal,omitempty" jsonschema:"treat pattern as a plain string (default false)"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match letters in either case (default false)"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"maximum number of matching lines to return (default 100)"`
}

func (in GrepInput) errPath() string { return in.Path }

// GrepMatch is one matching line.
type GrepMatch struct {
	Path string `json:"path"` // relative to the workspace root
	Line int    `json:"line"` // 1-based
	Text string `json:"text"`
}

// GrepOutput is grep's result.
type GrepOutput struct {
	Matches []GrepMatch `json:"matches"`
	// Truncated is set when more lines matched than max_results.
	Truncated bool `json:"truncated"`
}

func (o GrepOutput) text() string {
	var sb strings.Builder
	for _, m := range o.Matches {
		fmt.Fprintf(&sb, "%s:%d:%s\n", m.Path, m.Line, m.Text)
	}
	switch {
	case o.Truncated:
		fmt.Fprintf(&sb, "(stopped at %d matches: narrow the search or raise max_results)\n", len(o.Matches))
	case len(o.Matches) == 0:
		sb.WriteString("(no matches)\n")
	}
	return sb.String()
}

var grepTool = &sdk.Tool{
	Name:  "grep",
	Title: "Search file contents",
	Description: `Search the text files under a path of the workspace for a pattern, line by line, and return the matching lines as path:line:text (path relative to the workspace root, lines numbered from 1), in path then line order. Binary files are skipped; symlinks are not followed.
Errors: invalid_argument (bad regular expression), not_found (path does not exist), path_escape.`,
	InputSchema: inputSchema[GrepInput](map[string]any{"path": "", "literal": false, "ignore_case": false, "max_results": defaultGrepMatches}),
	Annotations: readOnly,
}

func grep(ctx context.Context, c *call, in GrepInput) (GrepOutput, error) {
	limit := in.MaxResults
	if limit <= 0 {
		limit = defaultGrepMatches
	}
	res, err := c.Backend.Grep(ctx, in.Pattern, exec.GrepOptions{Path: in.Path, Glob: in.Glob,
		Literal: in.Literal, IgnoreCase: in.IgnoreCase, MaxResults: limit})
	if err != nil {
		return GrepOutput{}, err
	}
	out := GrepOutput{Matches: make([]GrepMatch, 0, len(res.Matches)), Truncated: res.Truncated}
	for _, m := range res.Matches {
		out.Matches = append(out.Matches, GrepMatch{Path: m.Path, Line: m.Line, Text: m.Text})
	}
	return out, nil
}

func addFileTools(s *sdk.Server, ws source) {
	addTool(s, ws, readFileTool, readFile)
	addTool(s, ws, writeFileTool, writeFile)
	addTool(s, ws, editFileTool, editFile)
	addTool(s, ws, listDirectoryTool, listDirectory)
	addTool(s, ws, globTool, glob)
	addTool(s, ws, grepTool, grep)
}
