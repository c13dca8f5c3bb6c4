package serve

import (
	"io"
	"net/http"
	"path"
	"strconv"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/api"
)

func newFileInfo(fi exec.FileInfo) api.FileInfo {
	return api.FileInfo{Path: fi.Path, Name: fi.Name, Type: fi.Type.String(), Size: fi.Size,
		Mode: uint32(fi.Mode.Perm()), ModTime: fi.ModTime.UTC()}
}

// queryBool parses the boolean query parameter name ("1", "true", ...;
// absent is false).
func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid("query parameter %s=%q: a boolean (1, true, 0, false)", name, v)
	}
	return b, nil
}

// queryInt parses the integer query parameter name, def when absent.
func queryInt(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, invalid("query parameter %s=%q: an integer, 0 or more", name, v)
	}
	return n, nil
}

// readFile answers GET /v1/workspaces/{name}/files/{path}: the raw bytes,
// or with numbered=1 the numbered text view of limit lines (default 2000)
// from offset.
func (s *Server) readFile(c *call) error {
	p := c.r.PathValue("path")
	c.path = p
	numbered, err := queryBool(c.r, "numbered")
	if err != nil {
		return err
	}
	offset, err := queryInt(c.r, "offset", 0)
	if err != nil {
		return err
	}
	limit, err := queryInt(c.r, "limit", exec.DefaultReadLimit)
	if err != nil {
		return err
	}
	b := c.ws.Backend
	ctx := c.r.Context()
	if !numbered {
		if c.r.URL.Query().Has("offset") || c.r.URL.Query().Has("limit") {
			return invalid("offset and limit count lines of the numbered view: add numbered=1")
		}
		data, err := b.ReadFile(ctx, p)
		if err != nil {
			return err
		}
		c.w.Header().Set("Content-Type", "application/octet-stream")
		c.w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		c.w.WriteHeader(http.StatusOK)
		_, _ = c.w.Write(data)
		return nil
	}
	data, err := b.ReadFile(ctx, p)
	if err != nil {
		return err
	}
	content, err := b.Read(ctx, p, offset, limit)
	if err != nil {
		return err
	}
	total := 0
	for _, ch := range data {
		if ch == '\n' {
			total++
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		total++
	}
	writeJSON(c.w, http.StatusOK, api.NumberedRead{Path: p, Content: content, Offset: offset,
		Lines: min(limit, max(total-offset, 0)), TotalLines: total})
	return nil
}

// writeFile answers PUT /v1/workspaces/{name}/files/{path}: the body
// becomes the file's content; missing parent directories are created.
func (s *Server) writeFile(c *call) error {
	p := c.r.PathValue("path")
	c.path = p
	ctx, cancel := s.deadline(c, 0)
	defer cancel()
	data, err := io.ReadAll(c.r.Body)
	if err != nil {
		return err
	}
	if err := c.ws.Backend.WriteFile(ctx, p, data); err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, api.WriteResult{Path: p, Size: int64(len(data))})
	return nil
}

// removeFile answers DELETE /v1/workspaces/{name}/files/{path}
// (?recursive=1 for a directory that is not empty).
func (s *Server) removeFile(c *call) error {
	p := c.r.PathValue("path")
	c.path = p
	rec, err := queryBool(c.r, "recursive")
	if err != nil {
		return err
	}
	if err := c.ws.Backend.Remove(c.r.Context(), p, rec); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// queryPath is the path query parameter of the GET fs routes ("" is the
// root).
func queryPath(c *call) string {
	c.path = c.r.URL.Query().Get("path")
	return c.path
}

// stat answers GET .../fs/stat?path=P.
func (s *Server) stat(c *call) error {
	fi, err := c.ws.Backend.Stat(c.r.Context(), orRoot(queryPath(c)))
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, newFileInfo(fi))
	return nil
}

// exists answers GET .../fs/exists?path=P.
func (s *Server) exists(c *call) error {
	ok, err := c.ws.Backend.Exists(c.r.Context(), orRoot(queryPath(c)))
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, api.Exists{Exists: ok})
	return nil
}

func orRoot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// DefaultMaxEntries caps a recursive listing when max_entries is absent.
const DefaultMaxEntries = 100000

// list answers GET .../fs/list?path=P[&recursive=1][&max_entries=N]:
// the entries sorted by path (a directory's entries after it).
func (s *Server) list(c *call) error {
	p := queryPath(c)
	rec, err := queryBool(c.r, "recursive")
	if err != nil {
		return err
	}
	maxEntries, err := queryInt(c.r, "max_entries", DefaultMaxEntries)
	if err != nil {
		return err
	}
	b := c.ws.Backend
	ctx := c.r.Context()
	out := []api.FileInfo{}
	truncated := false
	var walk func(dir string) error
	walk = func(dir string) error {
		ents, err := b.List(ctx, dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if len(out) >= maxEntries {
				truncated = true
				return nil
			}
			out = append(out, newFileInfo(e))
			if rec && e.Type == exec.TypeDir {
				if err := walk(e.Path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(p); err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, api.Listing{Entries: out, Truncated: truncated})
	return nil
}

// mkdir answers POST .../fs/mkdir {"path", "parents"}.
func (s *Server) mkdir(c *call) error {
	var req api.Mkdir
	if err := decode(c.r, &req); err != nil {
		return err
	}
	c.path = req.Path
	if err := c.ws.Backend.Mkdir(c.r.Context(), req.Path, req.Parents); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// edit answers POST .../fs/edit {"path", "old", "new", "replace_all"}
// with the number of occurrences replaced.
func (s *Server) edit(c *call) error {
	var req api.Edit
	if err := decode(c.r, &req); err != nil {
		return err
	}
	c.path = req.Path
	n, err := c.ws.Backend.Edit(c.r.Context(), req.Path, req.Old, req.New, req.ReplaceAll)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, api.EditResult{Occurrences: n})
	return nil
}

// rename answers POST .../fs/rename {"from", "to"}.
func (s *Server) rename(c *call) error {
	var req api.FromTo
	if err := decode(c.r, &req); err != nil {
		return err
	}
	c.path = req.From
	if err := c.ws.Backend.Rename(c.r.Context(), req.From, req.To); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// copy answers POST .../fs/copy {"from", "to"} (a regular file).
func (s *Server) copy(c *call) error {
	var req api.FromTo
	if err := decode(c.r, &req); err != nil {
		return err
	}
	c.path = req.From
	if err := c.ws.Backend.Copy(c.r.Context(), req.From, req.To); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// glob answers POST .../fs/glob {"pattern", "path"}: the matching paths
// under path (default the root), relative to the workspace root.
func (s *Server) glob(c *call) error {
	var req api.Glob
	if err := decode(c.r, &req); err != nil {
		return err
	}
	c.path = req.Path
	b := c.ws.Backend
	if req.Path != "" && req.Path != "." {
		var err error
		if b, err = b.Scope(req.Path); err != nil {
			return err
		}
	}
	paths, err := b.Glob(c.r.Context(), req.Pattern)
	if err != nil {
		return err
	}
	if b != c.ws.Backend {
		for i, p := range paths {
			paths[i] = path.Join(req.Path, p)
		}
	}
	if paths == nil {
		paths = []string{}
	}
	writeJSON(c.w, http.StatusOK, api.GlobResult{Paths: paths})
	return nil
}

// grep answers POST .../fs/grep.
func (s *Server) grep(c *call) error {
	var req api.Grep
	if err := decode(c.r, &req); err != nil {
		return err
	}
	c.path = req.Path
	res, err := c.ws.Backend.Grep(c.r.Context(), req.Pattern, exec.GrepOptions{
		Path: req.Path, Glob: req.Glob, Literal: req.Literal, IgnoreCase: req.IgnoreCase, MaxResults: req.MaxResults,
	})
	if err != nil {
		return err
	}
	out := make([]api.GrepMatch, len(res.Matches))
	for i, m := range res.Matches {
		out[i] = api.GrepMatch{Path: m.Path, Line: m.Line, Text: m.Text}
	}
	writeJSON(c.w, http.StatusOK, api.GrepResult{Matches: out, Truncated: res.Truncated})
	return nil
}
