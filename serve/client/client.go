// Package client is a Go client of the agentfs serve HTTP API (/v1). It
// has one method per route, takes and returns the serve/api types, and
// reports a failed request as an *Error carrying the API's error code.
//
//	c := client.New("http://127.0.0.1:7070", token)
//	ws, err := c.CreateWorkspace(ctx, api.CreateWorkspace{Name: "demo"})
//	res, err := c.Workspace("demo").Exec(ctx, api.ExecRequest{Command: "ls"})
//
// A Client is safe for concurrent use. It never retries: the caller
// decides what is safe to repeat.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentfs/agentfs/serve/api"
)

// Client talks to one daemon with one token.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// New returns a client of the daemon at baseURL (e.g.
// "http://127.0.0.1:7070") that sends token as its bearer token ("" sends
// none). It uses http.DefaultClient; see WithHTTPClient.
func New(baseURL, token string) *Client {
	return &Client{base: strings.TrimSuffix(baseURL, "/"), token: token, hc: http.DefaultClient}
}

// WithHTTPClient returns a copy of c that sends its requests with hc
// (timeouts, TLS, transports).
func (c *Client) WithHTTPClient(hc *http.Client) *Client {
	cp := *c
	cp.hc = hc
	return &cp
}

// WithToken returns a copy of c that sends token.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// Error is a failed request: the HTTP status and the API's error body.
type Error struct {
	Status int
	// Code is the API's error code (not_found, path_escape, ...).
	Code    string
	Message string
	// Path is the workspace path the request named, if any.
	Path string
	// Rule is the policy rule that refused a command (policy_refused).
	Rule string
}

func (e *Error) Error() string {
	return fmt.Sprintf("agentfs serve: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

func apiError(status int, e api.Error) *Error {
	return &Error{Status: status, Code: e.Code, Message: e.Message, Path: e.Path, Rule: e.Rule}
}

// Code returns the API error code of err ("not_found", "path_escape",
// ...), or "" when err is not an *Error.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// request is one HTTP request to make.
type request struct {
	method string
	path   string // below the base URL, escaped
	query  url.Values
	body   io.Reader
	ctype  string
}

// do sends rq and returns the response when its status is 2xx; other
// statuses become an *Error (the caller closes the body).
func (c *Client) do(ctx context.Context, rq request) (*http.Response, error) {
	u := c.base + rq.path
	if len(rq.query) > 0 {
		u += "?" + rq.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, u, rq.body)
	if err != nil {
		return nil, err
	}
	if rq.ctype != "" {
		req.Header.Set("Content-Type", rq.ctype)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb api.ErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" {
		return nil, &Error{Status: resp.StatusCode, Code: "internal", Message: strings.TrimSpace(string(data))}
	}
	return nil, apiError(resp.StatusCode, eb.Error)
}

// call sends in as JSON (nil: no body) and decodes the answer into out
// (nil: the answer is dropped).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) error {
	rq := request{method: method, path: path, query: query}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rq.body, rq.ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, rq)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("agentfs serve: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// Health calls GET /healthz.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.call(ctx, "GET", "/healthz", nil, nil, &h)
}

// OpenAPI returns the daemon's OpenAPI document (GET /v1/openapi.json).
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	resp, err := c.do(ctx, request{method: "GET", path: "/v1/openapi.json"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return io.ReadAll(resp.Body)
}

// CreateWorkspace calls POST /v1/workspaces.
func (c *Client) CreateWorkspace(ctx context.Context, req api.CreateWorkspace) (api.Workspace, error) {
	var w api.Workspace
	return w, c.call(ctx, "POST", "/v1/workspaces", nil, req, &w)
}

// ListWorkspaces calls GET /v1/workspaces.
func (c *Client) ListWorkspaces(ctx context.Context) ([]api.Workspace, error) {
	var l api.WorkspaceList
	return l.Workspaces, c.call(ctx, "GET", "/v1/workspaces", nil, nil, &l)
}

// GetWorkspace calls GET /v1/workspaces/{name}.
func (c *Client) GetWorkspace(ctx context.Context, name string) (api.Workspace, error) {
	var w api.Workspace
	return w, c.call(ctx, "GET", wsPath(name), nil, nil, &w)
}

// DeleteWorkspace calls DELETE /v1/workspaces/{name}.
func (c *Client) DeleteWorkspace(ctx context.Context, name string) error {
	return c.call(ctx, "DELETE", wsPath(name), nil, nil, nil)
}

// CreateToken calls POST /v1/tokens; the answer's Token is the secret,
// shown only this once.
func (c *Client) CreateToken(ctx context.Context, req api.CreateToken) (api.Token, error) {
	var t api.Token
	return t, c.call(ctx, "POST", "/v1/tokens", nil, req, &t)
}

// ListTokens calls GET /v1/tokens (workspace "" lists all).
func (c *Client) ListTokens(ctx context.Context, workspace string) ([]api.Token, error) {
	var q url.Values
	if workspace != "" {
		q = url.Values{"workspace": {workspace}}
	}
	var l api.TokenList
	return l.Tokens, c.call(ctx, "GET", "/v1/tokens", q, nil, &l)
}

// RevokeToken calls DELETE /v1/tokens/{id}.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.call(ctx, "DELETE", "/v1/tokens/"+url.PathEscape(id), nil, nil, nil)
}

// Metrics returns the daemon's Prometheus metrics text (GET /metrics).
func (c *Client) Metrics(ctx context.Context) (string, error) {
	resp, err := c.do(ctx, request{method: "GET", path: "/metrics"})
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func wsPath(name string) string { return "/v1/workspaces/" + url.PathEscape(name) }

// Workspace returns the operations of workspace name. It does not check
// that the workspace exists; its calls fail with not_found if not.
func (c *Client) Workspace(name string) *Workspace {
	return &Workspace{c: c, name: name, base: wsPath(name)}
}

// Workspace is the client of one workspace's routes.
type Workspace struct {
	c    *Client
	name string
	base string
}

// Name is the workspace's name.
func (w *Workspace) Name() string { return w.name }

// Exec calls POST .../exec: it runs the command and returns its result
// (a non-zero exit code is not an error).
func (w *Workspace) Exec(ctx context.Context, req api.ExecRequest) (*api.ExecResult, error) {
	var r api.ExecResult
	if err := w.c.call(ctx, "POST", w.base+"/exec", nil, req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ExecStream calls POST .../exec/stream: each output event is passed to
// fn as it comes (from the calling goroutine); the result event is
// returned. An "error" event is returned as an *Error.
func (w *Workspace) ExecStream(ctx context.Context, req api.ExecRequest, fn func(api.StreamEvent)) (*api.ExecResult, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := w.c.do(ctx, request{method: "POST", path: w.base + "/exec/stream", body: bytes.NewReader(b), ctype: "application/json"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var ev api.StreamEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("agentfs serve: exec stream: %w", err)
		}
		switch ev.Type {
		case "result":
			return ev.Result, nil
		case "error":
			return nil, apiError(resp.StatusCode, *ev.Error)
		default:
			if fn != nil {
				fn(ev)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("agentfs serve: exec stream: %w", err)
	}
	return nil, fmt.Errorf("agentfs serve: exec stream ended without a result")
}

// StartJob calls POST .../jobs: the command starts in the background.
func (w *Workspace) StartJob(ctx context.Context, req api.ExecRequest) (api.Job, error) {
	var j api.Job
	return j, w.c.call(ctx, "POST", w.base+"/jobs", nil, req, &j)
}

// Jobs calls GET .../jobs.
func (w *Workspace) Jobs(ctx context.Context) ([]api.Job, error) {
	var l api.JobList
	return l.Jobs, w.c.call(ctx, "GET", w.base+"/jobs", nil, nil, &l)
}

// Job calls GET .../jobs/{id}.
func (w *Workspace) Job(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	return j, w.c.call(ctx, "GET", w.jobPath(id), nil, nil, &j)
}

// WaitJob calls POST .../jobs/{id}/wait: the ended job, or an *Error with
// code "timeout" when it still runs after timeoutSec seconds.
func (w *Workspace) WaitJob(ctx context.Context, id string, timeoutSec float64) (api.Job, error) {
	var j api.Job
	q := url.Values{"timeout": {strconv.FormatFloat(timeoutSec, 'f', -1, 64)}}
	return j, w.c.call(ctx, "POST", w.jobPath(id)+"/wait", q, nil, &j)
}

// KillJob calls POST .../jobs/{id}/kill and returns the ended job.
func (w *Workspace) KillJob(ctx context.Context, id string) (api.Job, error) {
	var j api.Job
	return j, w.c.call(ctx, "POST", w.jobPath(id)+"/kill", nil, nil, &j)
}

// JobOutput calls GET .../jobs/{id}/output from byte offset.
func (w *Workspace) JobOutput(ctx context.Context, id string, offset int) (api.JobOutput, error) {
	var o api.JobOutput
	return o, w.c.call(ctx, "GET", w.jobPath(id)+"/output", url.Values{"offset": {strconv.Itoa(offset)}}, nil, &o)
}

func (w *Workspace) jobPath(id string) string { return w.base + "/jobs/" + url.PathEscape(id) }

// filePath is the URL path of .../files/{p}: p escaped as one segment, so
// that the server receives it exactly ("..", "/x" and "a//b" included).
func (w *Workspace) filePath(p string) string {
	e := url.PathEscape(p)
	if p == "." || p == ".." {
		e = strings.ReplaceAll(p, ".", "%2E")
	}
	return w.base + "/files/" + e
}

// ReadFile calls GET .../files/{path}: the file's bytes.
func (w *Workspace) ReadFile(ctx context.Context, p string) ([]byte, error) {
	resp, err := w.c.do(ctx, request{method: "GET", path: w.filePath(p)})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return io.ReadAll(resp.Body)
}

// Read calls GET .../files/{path}?numbered=1: limit lines (0: 2000) from
// line offset (0: the first), numbered.
func (w *Workspace) Read(ctx context.Context, p string, offset, limit int) (api.NumberedRead, error) {
	q := url.Values{"numbered": {"1"}, "offset": {strconv.Itoa(offset)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var r api.NumberedRead
	return r, w.c.call(ctx, "GET", w.filePath(p), q, nil, &r)
}

// WriteFile calls PUT .../files/{path}: data becomes the file's content,
// missing parents are created.
func (w *Workspace) WriteFile(ctx context.Context, p string, data []byte) error {
	resp, err := w.c.do(ctx, request{method: "PUT", path: w.filePath(p), body: bytes.NewReader(data), ctype: "application/octet-stream"})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Remove calls DELETE .../files/{path} (recursive for a directory that is
// not empty).
func (w *Workspace) Remove(ctx context.Context, p string, recursive bool) error {
	var q url.Values
	if recursive {
		q = url.Values{"recursive": {"1"}}
	}
	return w.c.call(ctx, "DELETE", w.filePath(p), q, nil, nil)
}

// Stat calls GET .../fs/stat.
func (w *Workspace) Stat(ctx context.Context, p string) (api.FileInfo, error) {
	var fi api.FileInfo
	return fi, w.c.call(ctx, "GET", w.base+"/fs/stat", url.Values{"path": {p}}, nil, &fi)
}

// Exists calls GET .../fs/exists.
func (w *Workspace) Exists(ctx context.Context, p string) (bool, error) {
	var e api.Exists
	return e.Exists, w.c.call(ctx, "GET", w.base+"/fs/exists", url.Values{"path": {p}}, nil, &e)
}

// List calls GET .../fs/list.
func (w *Workspace) List(ctx context.Context, p string, recursive bool) (api.Listing, error) {
	q := url.Values{"path": {p}}
	if recursive {
		q.Set("recursive", "1")
	}
	var l api.Listing
	return l, w.c.call(ctx, "GET", w.base+"/fs/list", q, nil, &l)
}

// Mkdir calls POST .../fs/mkdir.
func (w *Workspace) Mkdir(ctx context.Context, p string, parents bool) error {
	return w.c.call(ctx, "POST", w.base+"/fs/mkdir", nil, api.Mkdir{Path: p, Parents: parents}, nil)
}

// Edit calls POST .../fs/edit and returns the occurrences replaced.
func (w *Workspace) Edit(ctx context.Context, req api.Edit) (int, error) {
	var r api.EditResult
	return r.Occurrences, w.c.call(ctx, "POST", w.base+"/fs/edit", nil, req, &r)
}

// Rename calls POST .../fs/rename.
func (w *Workspace) Rename(ctx context.Context, from, to string) error {
	return w.c.call(ctx, "POST", w.base+"/fs/rename", nil, api.FromTo{From: from, To: to}, nil)
}

// Copy calls POST .../fs/copy.
func (w *Workspace) Copy(ctx context.Context, from, to string) error {
	return w.c.call(ctx, "POST", w.base+"/fs/copy", nil, api.FromTo{From: from, To: to}, nil)
}

// Glob calls POST .../fs/glob.
func (w *Workspace) Glob(ctx context.Context, req api.Glob) ([]string, error) {
	var r api.GlobResult
	return r.Paths, w.c.call(ctx, "POST", w.base+"/fs/glob", nil, req, &r)
}

// Grep calls POST .../fs/grep.
func (w *Workspace) Grep(ctx context.Context, req api.Grep) (api.GrepResult, error) {
	var r api.GrepResult
	return r, w.c.call(ctx, "POST", w.base+"/fs/grep", nil, req, &r)
}

// DownloadTar calls GET .../tar/{dir}: the directory ("" the root) as a
// tar stream, which the caller reads and closes.
func (w *Workspace) DownloadTar(ctx context.Context, dir string) (io.ReadCloser, error) {
	resp, err := w.c.do(ctx, request{method: "GET", path: w.tarPath(dir)})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// UploadTar calls PUT .../tar/{dir}: the tar stream r is extracted into
// the directory (created with its parents); it returns what changed.
func (w *Workspace) UploadTar(ctx context.Context, dir string, r io.Reader) (*api.Changes, error) {
	resp, err := w.c.do(ctx, request{method: "PUT", path: w.tarPath(dir), body: r, ctype: "application/x-tar"})
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var ch *api.Changes
	if err := json.NewDecoder(resp.Body).Decode(&ch); err != nil {
		return nil, fmt.Errorf("agentfs serve: tar upload: decoding the answer: %w", err)
	}
	return ch, nil
}

func (w *Workspace) tarPath(dir string) string {
	return strings.Replace(w.filePath(dir), "/files/", "/tar/", 1)
}

// SaveSnapshot calls POST .../snapshots.
func (w *Workspace) SaveSnapshot(ctx context.Context, req api.SaveSnapshot) (api.Snapshot, error) {
	var s api.Snapshot
	return s, w.c.call(ctx, "POST", w.base+"/snapshots", nil, req, &s)
}

// Snapshots calls GET .../snapshots (unique: with the bytes each frees).
func (w *Workspace) Snapshots(ctx context.Context, unique bool) ([]api.Snapshot, error) {
	var q url.Values
	if unique {
		q = url.Values{"unique": {"1"}}
	}
	var l api.SnapshotList
	return l.Snapshots, w.c.call(ctx, "GET", w.base+"/snapshots", q, nil, &l)
}

// DeleteSnapshot calls DELETE .../snapshots/{snap}.
func (w *Workspace) DeleteSnapshot(ctx context.Context, name string) error {
	return w.c.call(ctx, "DELETE", w.base+"/snapshots/"+url.PathEscape(name), nil, nil, nil)
}

// Restore calls POST .../snapshots/{snap}/restore.
func (w *Workspace) Restore(ctx context.Context, snap, message string) (api.RestoreResult, error) {
	var r api.RestoreResult
	return r, w.c.call(ctx, "POST", w.base+"/snapshots/"+url.PathEscape(snap)+"/restore", nil, api.Restore{Message: message}, &r)
}

// Diff calls POST .../diff.
func (w *Workspace) Diff(ctx context.Context, req api.Diff) (api.DiffResult, error) {
	var r api.DiffResult
	return r, w.c.call(ctx, "POST", w.base+"/diff", nil, req, &r)
}

// Fork calls POST .../fork (admin token).
func (w *Workspace) Fork(ctx context.Context, req api.Fork) (api.Workspace, error) {
	var r api.Workspace
	return r, w.c.call(ctx, "POST", w.base+"/fork", nil, req, &r)
}

// Branches calls GET .../branches.
func (w *Workspace) Branches(ctx context.Context) ([]api.Branch, error) {
	var l api.BranchList
	return l.Branches, w.c.call(ctx, "GET", w.base+"/branches", nil, nil, &l)
}

// VirtualDiff calls POST .../virtual/diff.
func (w *Workspace) VirtualDiff(ctx context.Context, req api.VirtualDiff) (api.VirtualDiffResult, error) {
	var r api.VirtualDiffResult
	return r, w.c.call(ctx, "POST", w.base+"/virtual/diff", nil, req, &r)
}

// VirtualCommit calls POST .../virtual/commit.
func (w *Workspace) VirtualCommit(ctx context.Context, req api.VirtualCommit) (api.VirtualCommitResult, error) {
	var r api.VirtualCommitResult
	return r, w.c.call(ctx, "POST", w.base+"/virtual/commit", nil, req, &r)
}

// VirtualDiscard calls POST .../virtual/discard.
func (w *Workspace) VirtualDiscard(ctx context.Context, req api.VirtualDiscard) (api.VirtualDiscardResult, error) {
	var r api.VirtualDiscardResult
	return r, w.c.call(ctx, "POST", w.base+"/virtual/discard", nil, req, &r)
}
