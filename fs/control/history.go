package control

// History requests: checkpoints, snapshots, restores, diffs, forks,
// branches, gc and fsck, answered by the mount's server with its own open
// volume — so that a MOUNTPOINT works wherever a store URL does, with the
// mount's credentials (which the client may not have: they may come from
// the server's environment, or from a URL whose secret parts Info.URL
// leaves out), and so that "live" means the mount's state as of the
// request.
//
// Long requests (diff, gc, fsck) answer with a stream: one JSON object
// per line (progress, changes), then one with the result or the error.

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
	"strings"
	"time"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/snapshot"
)

// History is what a mount offers for its volume's history. A Backend that
// also implements History serves the /v1/history/ requests; for any other
// the server answers them with ErrNoHistory. Methods are called from the
// server's request goroutines, possibly concurrently.
type History interface {
	// Checkpoint commits everything written to the mount before the call
	// and returns the commit that covers it (cache.Volume.Commit): a new
	// commit of kind "checkpoint" with message, or the head when nothing
	// was pending. On a read-only mount it returns the commit shown.
	Checkpoint(ctx context.Context, message string) (snapshot.CommitID, error)
	// SaveSnapshot checkpoints and names the commit that covers everything
	// written before the call (cache.Volume.SaveSnapshot).
	SaveSnapshot(ctx context.Context, name, message string) (snapshot.Snapshot, error)
	// Restore makes the live mount the tree of ref, keeping the state
	// before as an automatic snapshot (cache.Volume.Restore).
	Restore(ctx context.Context, ref, message string) (snapshot.RestoreResult, error)
	// Repo is the mount's open volume, for the requests that only read or
	// name history (list, diff, fork, branches, gc, fsck).
	Repo() *snapshot.Repo
}

// ErrNoHistory: the mount's server does not serve history requests.
var ErrNoHistory = errors.New("this mount does not serve history requests")

// Live is the reference that names a mount's current state in a diff: the
// server checkpoints and uses the commit that covers everything written
// before the request.
const Live = "live"

// RefCounts are the numbers of branches and snapshots of a mount's volume
// (snapshot.Repo.RefCounts), part of its Status.
type RefCounts struct {
	Branches  int `json:"branches"`
	Snapshots int `json:"snapshots"`
}

// DiffRequest asks for the differences from A to B. Each is "live" (see
// Live) or any reference snapshot.Repo.Resolve accepts: a snapshot, a
// branch (its head), BRANCH@SEQ.
type DiffRequest struct {
	A string `json:"a"`
	B string `json:"b"`
	// Dir restricts the changes to a directory (relative to the root);
	// paths in the answer stay relative to the root.
	Dir string `json:"dir,omitempty"`
	// Patch asks for unified content diffs of text files, each side read
	// up to MaxBytes (default 4 MiB).
	Patch    bool  `json:"patch,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// DiffResult names the two commits a diff compared: their IDs, and how the
// references resolved, for messages ("snapshot base (of main@3)",
// "live (main@9)").
type DiffResult struct {
	A     snapshot.CommitID `json:"a"`
	B     snapshot.CommitID `json:"b"`
	AName string            `json:"a_name"`
	BName string            `json:"b_name"`
}

// GCRequest are the options of a gc run by the mount (snapshot.GCOptions).
type GCRequest struct {
	// Policy says which commits to keep; nil applies the volume's own
	// (snapshot.Repo.Retention).
	Policy *snapshot.Retention `json:"policy,omitempty"`
	DryRun bool                `json:"dry_run,omitempty"`
	// Grace overrides the grace period (tests only; see snapshot.GCOptions).
	Grace time.Duration `json:"grace_ns,omitempty"`
}

// historyCodes are the errors that keep their identity across the socket:
// the client's error matches the same sentinel with errors.Is.
var historyCodes = map[string]error{
	"bad_name":         snapshot.ErrBadName,
	"snapshot_exists":  snapshot.ErrSnapshotExists,
	"no_snapshot":      snapshot.ErrNoSnapshot,
	"no_ref":           snapshot.ErrNoRef,
	"ambiguous_ref":    snapshot.ErrAmbiguousRef,
	"branch_exists":    snapshot.ErrBranchExists,
	"default_branch":   snapshot.ErrDefaultBranch,
	"lease_held":       snapshot.ErrLeaseHeld,
	"no_commits":       snapshot.ErrNoCommits,
	"source_gone":      snapshot.ErrSourceGone,
	"bad_retention":    snapshot.ErrBadRetention,
	"read_only":        cache.ErrReadOnly,
	"no_history":       ErrNoHistory,
	"history_canceled": context.Canceled,
}

// remoteError is an error the server reported: its text, and the sentinel
// its code names (nil for none).
type remoteError struct {
	msg  string
	kind error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// decodeError rebuilds a server's error from its reply.
func decodeError(e errorReply) error {
	return &remoteError{msg: e.Error, kind: historyCodes[e.Code]}
}

// errorCode returns the code of err's sentinel, or "".
func errorCode(err error) string {
	for code, sentinel := range historyCodes {
		if errors.Is(err, sentinel) {
			return code
		}
	}
	return ""
}

// historyEvent is one line of a streamed answer.
type historyEvent struct {
	Progress *snapshot.Progress `json:"progress,omitempty"`
	Change   *histdiff.Change   `json:"change,omitempty"`
	Result   json.RawMessage    `json:"result,omitempty"`
	Error    *errorReply        `json:"error,omitempty"`
}

// registerHistory adds the history routes to mux.
func (s *Server) registerHistory(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/history/checkpoint", s.withHistory(s.handleCheckpoint))
	mux.HandleFunc("POST /v1/history/snapshots", s.withHistory(s.handleSaveSnapshot))
	mux.HandleFunc("GET /v1/history/snapshots", s.withHistory(s.handleListSnapshots))
	mux.HandleFunc("DELETE /v1/history/snapshots/{name}", s.withHistory(s.handleDeleteSnapshot))
	mux.HandleFunc("POST /v1/history/restore", s.withHistory(s.handleRestore))
	mux.HandleFunc("POST /v1/history/diff", s.withHistory(s.handleDiff))
	mux.HandleFunc("POST /v1/history/fork", s.withHistory(s.handleFork))
	mux.HandleFunc("GET /v1/history/branches", s.withHistory(s.handleBranches))
	mux.HandleFunc("DELETE /v1/history/branches/{name}", s.withHistory(s.handleDeleteBranch))
	mux.HandleFunc("POST /v1/history/gc", s.withHistory(s.handleGC))
	mux.HandleFunc("POST /v1/history/fsck", s.withHistory(s.handleFsck))
	mux.HandleFunc("GET /v1/history/retention", s.withHistory(s.handleGetRetention))
	mux.HandleFunc("POST /v1/history/retention", s.withHistory(s.handleSetRetention))
}

type historyHandler func(w http.ResponseWriter, r *http.Request, h History)

func (s *Server) withHistory(fn historyHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h, ok := s.b.(History)
		if !ok {
			writeJSON(w, http.StatusNotImplemented, errorReply{Error: ErrNoHistory.Error(), Code: "no_history"})
			return
		}
		fn(w, r, h)
	}
}

// refCounts returns the volume's branch and snapshot counts, or nil when
// the backend serves no history or the listing fails.
func (s *Server) refCounts(ctx context.Context) *RefCounts {
	h, ok := s.b.(History)
	if !ok {
		return nil
	}
	b, n, err := h.Repo().RefCounts(ctx)
	if err != nil {
		s.log.Debug("counting branches and snapshots failed", "err", err)
		return nil
	}
	return &RefCounts{Branches: b, Snapshots: n}
}

// failHistory answers a failed history request, keeping the error's code.
func (s *Server) failHistory(w http.ResponseWriter, op string, err error) {
	rep := errorReply{Error: err.Error(), Code: errorCode(err)}
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, context.Canceled):
		code = 499
	case errors.Is(err, snapshot.ErrNoRef), errors.Is(err, snapshot.ErrNoSnapshot), errors.Is(err, snapshot.ErrNoCommits):
		code = http.StatusNotFound
	case rep.Code != "":
		code = http.StatusBadRequest
	}
	s.log.Debug("history request failed", "op", op, "err", err)
	writeJSON(w, code, rep)
}

// decodeBody reads a JSON request body into v; an empty body leaves v as
// is.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	return nil
}

type messageRequest struct {
	Name    string `json:"name,omitempty"`
	Ref     string `json:"ref,omitempty"`
	Message string `json:"message,omitempty"`
}

func (s *Server) handleCheckpoint(w http.ResponseWriter, r *http.Request, h History) {
	var req messageRequest
	if err := decodeBody(r, &req); err != nil {
		s.failHistory(w, "checkpoint", err)
		return
	}
	id, err := h.Checkpoint(r.Context(), req.Message)
	if err != nil {
		s.failHistory(w, "checkpoint", err)
		return
	}
	writeJSON(w, http.StatusOK, id)
}

func (s *Server) handleSaveSnapshot(w http.ResponseWriter, r *http.Request, h History) {
	var req messageRequest
	if err := decodeBody(r, &req); err != nil {
		s.failHistory(w, "snapshot save", err)
		return
	}
	snap, err := h.SaveSnapshot(r.Context(), req.Name, req.Message)
	if err != nil {
		s.failHistory(w, "snapshot save", err)
		return
	}
	writeJSON(w, http.StatusOK, snap)
}

// snapshotInfoJSON carries snapshot.SnapshotInfo (whose UniqueBytes has
// no JSON name of its own).
type snapshotInfoJSON struct {
	snapshot.Snapshot
	UniqueBytes int64 `json:"unique_bytes"`
}

func (s *Server) handleListSnapshots(w http.ResponseWriter, r *http.Request, h History) {
	list, err := h.Repo().ListSnapshots(r.Context(), snapshot.ListOptions{Unique: r.URL.Query().Get("unique") == "1"})
	if err != nil {
		s.failHistory(w, "snapshot list", err)
		return
	}
	out := make([]snapshotInfoJSON, len(list))
	for i, si := range list {
		out[i] = snapshotInfoJSON{Snapshot: si.Snapshot, UniqueBytes: si.UniqueBytes}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDeleteSnapshot(w http.ResponseWriter, r *http.Request, h History) {
	if err := h.Repo().DeleteSnapshot(r.Context(), r.PathValue("name")); err != nil {
		s.failHistory(w, "snapshot rm", err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) handleRestore(w http.ResponseWriter, r *http.Request, h History) {
	var req messageRequest
	if err := decodeBody(r, &req); err != nil {
		s.failHistory(w, "restore", err)
		return
	}
	res, err := h.Restore(r.Context(), req.Ref, req.Message)
	if err != nil {
		s.failHistory(w, "restore", err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

type forkRequest struct {
	Src     string `json:"src"`
	Branch  string `json:"branch"`
	Message string `json:"message,omitempty"`
}

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request, h History) {
	var req forkRequest
	if err := decodeBody(r, &req); err != nil {
		s.failHistory(w, "fork", err)
		return
	}
	c, err := h.Repo().Fork(r.Context(), req.Src, req.Branch, snapshot.ForkOptions{Message: req.Message})
	if err != nil {
		s.failHistory(w, "fork", err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleBranches(w http.ResponseWriter, r *http.Request, h History) {
	list, err := h.Repo().Branches(r.Context(), time.Now())
	if err != nil {
		s.failHistory(w, "branch list", err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) handleDeleteBranch(w http.ResponseWriter, r *http.Request, h History) {
	n, err := h.Repo().DeleteBranch(r.Context(), r.PathValue("name"),
		snapshot.DeleteBranchOptions{Force: r.URL.Query().Get("force") == "1"})
	if err != nil {
		s.failHistory(w, "branch rm", err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Commits int `json:"commits"`
	}{n})
}

// resolveLive resolves a diff side: "live" checkpoints the mount.
func resolveLive(ctx context.Context, h History, ref string) (snapshot.Source, error) {
	if ref == Live {
		id, err := h.Checkpoint(ctx, "")
		if err != nil {
			return snapshot.Source{}, fmt.Errorf("live: %w", err)
		}
		c, err := h.Repo().ReadCommit(ctx, id)
		if err != nil {
			return snapshot.Source{}, fmt.Errorf("live (%v): %w", id, err)
		}
		return snapshot.Source{Commit: id, Tree: snapshot.CommitTree(c), Time: c.Time}, nil
	}
	return h.Repo().Resolve(ctx, ref)
}

func sourceName(ref string, s snapshot.Source) string {
	if ref == Live {
		return fmt.Sprintf("live (%v)", s.Commit)
	}
	return s.String()
}

func (s *Server) handleDiff(w http.ResponseWriter, r *http.Request, h History) {
	var req DiffRequest
	if err := decodeBody(r, &req); err != nil {
		s.failHistory(w, "diff", err)
		return
	}
	ctx := r.Context()
	a, err := resolveLive(ctx, h, req.A)
	if err != nil {
		s.failHistory(w, "diff", err)
		return
	}
	b, err := resolveLive(ctx, h, req.B)
	if err != nil {
		s.failHistory(w, "diff", err)
		return
	}
	st := newStream(w)
	err = histdiff.Diff(ctx, h.Repo(), a.Tree, b.Tree, histdiff.Options{Dir: req.Dir, Patch: req.Patch, MaxBytes: req.MaxBytes},
		func(c histdiff.Change) error { return st.send(historyEvent{Change: &c}) })
	st.finish(DiffResult{A: a.Commit, B: b.Commit, AName: sourceName(req.A, a), BName: sourceName(req.B, b)}, err)
}

func (s *Server) handleGC(w http.ResponseWriter, r *http.Request, h History) {
	var req GCRequest
	if err := decodeBody(r, &req); err != nil {
		s.failHistory(w, "gc", err)
		return
	}
	st := newStream(w)
	opts := req.Options()
	opts.Progress = st.progress
	rep, err := h.Repo().GC(r.Context(), opts)
	st.finish(rep, err)
}

func (s *Server) handleFsck(w http.ResponseWriter, r *http.Request, h History) {
	full := r.URL.Query().Get("full") == "1"
	st := newStream(w)
	rep, err := h.Repo().Fsck(r.Context(), snapshot.FsckOptions{Full: full, Progress: st.progress})
	st.finish(rep, err)
}

// stream writes a streamed answer; its methods are called from one
// goroutine at a time.
type stream struct {
	w     http.ResponseWriter
	enc   *json.Encoder
	flush func()
	last  time.Time
	err   error // the first write error: the client went away
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w, enc: json.NewEncoder(w), flush: func() {}}
	if f, ok := w.(http.Flusher); ok {
		st.flush = f.Flush
	}
	return st
}

func (st *stream) send(ev historyEvent) error {
	if st.err != nil {
		return st.err
	}
	st.err = st.enc.Encode(ev)
	return st.err
}

// progress sends a progress event at most every 100 ms.
func (st *stream) progress(p snapshot.Progress) {
	if time.Since(st.last) < 100*time.Millisecond {
		return
	}
	st.last = time.Now()
	_ = st.send(historyEvent{Progress: &p})
	st.flush()
}

// finish sends the result, or err.
func (st *stream) finish(result any, err error) {
	if err != nil {
		_ = st.send(historyEvent{Error: &errorReply{Error: err.Error(), Code: errorCode(err)}})
		return
	}
	b, err := json.Marshal(result)
	if err != nil {
		_ = st.send(historyEvent{Error: &errorReply{Error: "encode result: " + err.Error()}})
		return
	}
	_ = st.send(historyEvent{Result: b})
}

// Checkpoint commits everything written to the mount before the call and
// returns the commit that covers it (see History.Checkpoint).
func (c *Client) Checkpoint(ctx context.Context, message string) (snapshot.CommitID, error) {
	var id snapshot.CommitID
	err := c.post(ctx, "/v1/history/checkpoint", messageRequest{Message: message}, &id)
	return id, err
}

// SaveSnapshot saves the mount's state as of the call as snapshot name: a
// consistent point of everything written before.
func (c *Client) SaveSnapshot(ctx context.Context, name, message string) (snapshot.Snapshot, error) {
	var s snapshot.Snapshot
	err := c.post(ctx, "/v1/history/snapshots", messageRequest{Name: name, Message: message}, &s)
	return s, err
}

// Restore makes the live mount the tree of ref; the state before is kept
// as the automatic snapshot the result names (RestoreResult.Saved).
func (c *Client) Restore(ctx context.Context, ref, message string) (snapshot.RestoreResult, error) {
	var res snapshot.RestoreResult
	err := c.post(ctx, "/v1/history/restore", messageRequest{Ref: ref, Message: message}, &res)
	return res, err
}

// ListSnapshots lists the volume's snapshots (snapshot.Repo.ListSnapshots),
// with the bytes unique to each when unique is set (-1 otherwise).
func (c *Client) ListSnapshots(ctx context.Context, unique bool) ([]snapshot.SnapshotInfo, error) {
	path := "/v1/history/snapshots"
	if unique {
		path += "?unique=1"
	}
	var list []snapshotInfoJSON
	if err := c.do(ctx, http.MethodGet, path, &list); err != nil {
		return nil, err
	}
	out := make([]snapshot.SnapshotInfo, len(list))
	for i, s := range list {
		out[i] = snapshot.SnapshotInfo{Snapshot: s.Snapshot, UniqueBytes: s.UniqueBytes}
	}
	return out, nil
}

// DeleteSnapshot removes snapshot name.
func (c *Client) DeleteSnapshot(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/history/snapshots/"+url.PathEscape(name), nil)
}

// Fork creates branch newBranch from src (snapshot.Repo.Fork) and returns
// its first commit.
func (c *Client) Fork(ctx context.Context, src, newBranch, message string) (snapshot.Commit, error) {
	var out snapshot.Commit
	err := c.post(ctx, "/v1/history/fork", forkRequest{Src: src, Branch: newBranch, Message: message}, &out)
	return out, err
}

// Branches lists the volume's branches (snapshot.Repo.Branches).
func (c *Client) Branches(ctx context.Context) ([]snapshot.BranchInfo, error) {
	var out []snapshot.BranchInfo
	err := c.do(ctx, http.MethodGet, "/v1/history/branches", &out)
	return out, err
}

// DeleteBranch removes branch name (snapshot.Repo.DeleteBranch) and
// returns the number of commits removed.
func (c *Client) DeleteBranch(ctx context.Context, name string, force bool) (int, error) {
	path := "/v1/history/branches/" + url.PathEscape(name)
	if force {
		path += "?force=1"
	}
	var out struct {
		Commits int `json:"commits"`
	}
	err := c.do(ctx, http.MethodDelete, path, &out)
	return out.Commits, err
}

// Diff calls fn for every difference from req.A to req.B, computed by the
// server, in path order, and returns the commits compared. An error from
// fn stops the diff and is returned.
func (c *Client) Diff(ctx context.Context, req DiffRequest, fn func(histdiff.Change) error) (DiffResult, error) {
	var res DiffResult
	err := c.stream(ctx, "/v1/history/diff", req, func(ev historyEvent) error {
		if ev.Change != nil {
			return fn(*ev.Change)
		}
		return nil
	}, &res)
	return res, err
}

// GC runs gc on the mount's volume (snapshot.Repo.GC); progress, if not
// nil, is called with the server's progress from this goroutine.
func (c *Client) GC(ctx context.Context, req GCRequest, progress func(snapshot.Progress)) (snapshot.GCReport, error) {
	var rep snapshot.GCReport
	err := c.stream(ctx, "/v1/history/gc", req, progressOnly(progress), &rep)
	return rep, err
}

// Fsck checks the mount's volume (snapshot.Repo.Fsck); progress as for GC.
// Problems come back with their messages; Problem.Err is nil.
func (c *Client) Fsck(ctx context.Context, full bool, progress func(snapshot.Progress)) (snapshot.FsckReport, error) {
	path := "/v1/history/fsck"
	if full {
		path += "?full=1"
	}
	var rep snapshot.FsckReport
	err := c.stream(ctx, path, nil, progressOnly(progress), &rep)
	return rep, err
}

func progressOnly(fn func(snapshot.Progress)) func(historyEvent) error {
	return func(ev historyEvent) error {
		if ev.Progress != nil && fn != nil {
			fn(*ev.Progress)
		}
		return nil
	}
}

// post sends body as JSON and decodes the reply into out.
func (c *Client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.doBody(ctx, http.MethodPost, path, bytes.NewReader(b), out)
}

// stream sends a streamed request and passes each event to fn until the
// result, which it decodes into out.
func (c *Client) stream(ctx context.Context, path string, body any, fn func(historyEvent) error, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // an error from fn ends the request, and the server's work
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agentfs"+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e errorReply
		reply, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(reply, &e) != nil || e.Error == "" {
			return fmt.Errorf("control socket %s: POST %s: HTTP %d", c.socket, path, resp.StatusCode)
		}
		return decodeError(e)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		var ev historyEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("control socket %s: bad reply to %s: %w", c.socket, path, err)
		}
		switch {
		case ev.Error != nil:
			return decodeError(*ev.Error)
		case ev.Result != nil:
			if err := json.Unmarshal(ev.Result, out); err != nil {
				return fmt.Errorf("control socket %s: bad result of %s: %w", c.socket, path, err)
			}
			return nil
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("control socket %s: %s: %w", c.socket, path, err)
	}
	return fmt.Errorf("control socket %s: %s: the server ended the answer without a result (did the mount stop?)", c.socket, strings.TrimPrefix(path, "/v1/"))
}
