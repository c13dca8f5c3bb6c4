package serve_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/exec/exectest"
	"github.com/agentfs/agentfs/serve"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/client"
	"github.com/agentfs/agentfs/serve/workspace"
)

// TestSuiteOverHTTP runs exec's conformance suite through the HTTP API
// (after exec's own runs of the local and docker backends, in a directory
// and on a mount), with serve/client, against a daemon whose workspace is a
// real agentfs mount, for each backend the daemon runs commands with. Each
// backend the suite asks for is a workspace of a daemon of its own, whose
// backends have the suite's options.
func TestSuiteOverHTTP(t *testing.T) {
	t.Run("local", func(t *testing.T) { exectest.Run(t, remoteFixture(exec.Spec{})) })
	t.Run("docker", func(t *testing.T) {
		exectest.Run(t, remoteFixture(exec.Spec{Type: exec.TypeDocker, Image: testImage(), User: "1000:1000"}))
	})
}

// remoteFixture makes workspaces whose commands run with backend spec.
// The API has no scopes, no seams of the caller's, a fixed default timeout
// (DefaultExecTimeout), no Close (deleting a workspace is not closing a
// backend), and a cancelled request has no answer: the fixture claims none
// of these.
func remoteFixture(spec exec.Spec) exectest.Fixture[*remoteJob] {
	return exectest.Fixture[*remoteJob]{
		New: func(t *testing.T, opts exec.Options) (exectest.Backend[*remoteJob], string) {
			if opts.Syncer != nil || opts.ChangeTracker != nil {
				t.Fatal("a daemon's backends have their mount's sync barrier and change tracker")
			}
			d := newDaemonConfig(t, func(cfg *workspace.Config) { cfg.Exec, cfg.Backend = opts, spec }, nil)
			d.create("suite")
			h, err := d.mgr.Acquire(ctxT(t), "suite")
			if err != nil {
				t.Fatal(err)
			}
			dir, workDir := h.MountPoint, h.Backend.WorkDir()
			h.Release()
			return newRemote(t, d.admin, "suite", workDir), dir
		},
		Alive: func(t *testing.T, b exectest.Backend[*remoteJob], pid int) bool {
			if !spec.Docker() {
				return procAlive(pid)
			}
			return containerAlive(t, b, pid)
		},
	}
}

// containerAlive looks for pid in the workspace's container, with a
// command through the API.
func containerAlive(t *testing.T, b exectest.Backend[*remoteJob], pid int) bool {
	t.Helper()
	res, err := b.Exec(exectest.Ctx(t), exec.Request{Argv: []string{"cat", "/proc/" + strconv.Itoa(pid) + "/stat"}})
	if err != nil {
		t.Fatalf("checking pid %d in the container: %v", pid, err)
	}
	return res.ExitCode == 0 && procStatAlive(string(res.Stdout))
}

// procAlive reports whether pid is a live (not zombie) process of this
// host: the daemon runs in the test's process, its commands on this host.
func procAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && procStatAlive(string(data))
}

// procStatAlive reports whether the /proc/PID/stat line s is of a live
// (not zombie) process.
func procStatAlive(s string) bool {
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// remote is an exectest.Backend over one workspace of the HTTP API. It
// maps exec's requests to the API's and the API's error codes back to
// exec's sentinels (errorOf), in this one place.
type remote struct {
	t       testing.TB
	c       *client.Client
	ws      *client.Workspace
	workDir string

	mu   sync.Mutex
	jobs map[string]*remoteJob // guarded by mu: one handle a job, as exec.Backend
}

func newRemote(t testing.TB, c *client.Client, name, workDir string) *remote {
	return &remote{t: t, c: c, ws: c.Workspace(name), workDir: workDir, jobs: map[string]*remoteJob{}}
}

var _ exectest.Backend[*remoteJob] = (*remote)(nil)

// errorOf maps an error of the client to exec's sentinels, keeping it
// wrapped: the API's codes name the conditions exec's sentinels do. op and
// p are the operation and path a path_escape is reported for; notFound is
// what not_found means for the operation (fs.ErrNotExist but for jobs).
func errorOf(err error, op, p string, notFound error) error {
	var ce *client.Error
	if err == nil || !errors.As(err, &ce) {
		return err
	}
	var s error
	switch ce.Code {
	case "path_escape":
		s = &exec.PathError{Op: op, Path: p, Reason: ce.Message}
	case "policy_refused":
		s = &exec.PolicyError{Rule: ce.Rule, Reason: ce.Message}
	case "not_found":
		s = notFound
	default:
		if s = sentinelOf[ce.Code]; s == nil {
			return err
		}
	}
	return fmt.Errorf("%w: %w", s, err)
}

// sentinelOf is the exec sentinel (or errno, as exec.Backend's errors wrap
// it) of each API code that names one condition.
var sentinelOf = map[string]error{
	"exists":           fs.ErrExist,
	"not_a_directory":  syscall.ENOTDIR,
	"is_a_directory":   syscall.EISDIR,
	"not_empty":        syscall.ENOTEMPTY,
	"not_unique":       exec.ErrNotUnique,
	"no_match":         exec.ErrNoMatch,
	"out_of_range":     exec.ErrOutOfRange,
	"binary_file":      exec.ErrBinary,
	"invalid_argument": exec.ErrInvalid,
	"timeout":          context.DeadlineExceeded,
	"canceled":         context.Canceled,
}

func (r *remote) fileErr(err error, op, p string) error { return errorOf(err, op, p, fs.ErrNotExist) }

// WorkDir is where the workspace's commands see its root: the mount point,
// or the container's directory of the docker backend.
func (r *remote) WorkDir() string { return r.workDir }

// execRequest is req as the API takes it: stdin and output in base64, so
// that bytes round-trip.
func execRequest(req exec.Request, job bool) (api.ExecRequest, error) {
	ar := api.ExecRequest{Command: req.Command, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, Encoding: api.EncodingBase64}
	switch {
	case req.Timeout > 0:
		ar.Timeout = req.Timeout.Seconds()
	case req.Timeout < 0 && !job:
		// No timeout: the API's longest.
		ar.Timeout = serve.MaxExecTimeout.Seconds()
	}
	switch {
	case req.OutputLimit > 0:
		ar.OutputLimit = req.OutputLimit
	case req.OutputLimit < 0:
		ar.OutputLimit = math.MaxInt64 // no cap
	}
	if req.Stdin != nil {
		in, err := io.ReadAll(req.Stdin)
		if err != nil {
			return ar, err
		}
		ar.Stdin = base64.StdEncoding.EncodeToString(in)
	}
	return ar, nil
}

// decode64 decodes an output field the API sent in base64.
func decode64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("output not base64: %w", err)
	}
	return b, nil
}

// result converts an API result (its output in base64).
func result(ar *api.ExecResult) (*exec.Result, error) {
	res := &exec.Result{ExitCode: ar.ExitCode, TimedOut: ar.TimedOut, Duration: time.Duration(ar.DurationMS) * time.Millisecond}
	res.Truncated = ar.Truncated
	var err error
	if res.Stdout, err = decode64(ar.Stdout); err != nil {
		return nil, err
	}
	if res.Stderr, err = decode64(ar.Stderr); err != nil {
		return nil, err
	}
	if res.Merged, err = decode64(ar.Output); err != nil {
		return nil, err
	}
	if ar.Changes != nil {
		res.Changes = &exec.Changes{Created: ar.Changes.Created, Modified: ar.Changes.Modified, Deleted: ar.Changes.Deleted}
	}
	return res, nil
}

// Exec runs req through POST .../exec, or .../exec/stream when req has
// live writers (the result is then assembled from the stream's events).
func (r *remote) Exec(ctx context.Context, req exec.Request) (*exec.Result, error) {
	ar, err := execRequest(req, false)
	if err != nil {
		return nil, err
	}
	if req.Stdout == nil && req.Stderr == nil {
		res, err := r.ws.Exec(ctx, ar)
		if err != nil {
			return nil, errorOf(err, "cwd", req.Cwd, fs.ErrNotExist)
		}
		return result(res)
	}
	var out exec.Output
	var derr error
	res, err := r.ws.ExecStream(ctx, ar, func(ev api.StreamEvent) {
		b, err := decode64(ev.Data)
		if err != nil {
			derr = err
			return
		}
		out.Merged = append(out.Merged, b...)
		w := req.Stderr
		if ev.Type == "stdout" {
			out.Stdout, w = append(out.Stdout, b...), req.Stdout
		} else {
			out.Stderr = append(out.Stderr, b...)
		}
		if w != nil {
			_, _ = w.Write(b)
		}
	})
	if err != nil {
		return nil, errorOf(err, "cwd", req.Cwd, fs.ErrNotExist)
	}
	if derr != nil {
		return nil, derr
	}
	er, err := result(res)
	if err != nil {
		return nil, err
	}
	er.Stdout, er.Stderr, er.Merged = out.Stdout, out.Stderr, out.Merged
	return er, nil
}

// job returns the one handle of job id.
func (r *remote) job(id string) *remoteJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[id]
	if j == nil {
		j = &remoteJob{r: r, id: id}
		r.jobs[id] = j
	}
	return j
}

// Start starts req as a job (POST .../jobs).
func (r *remote) Start(ctx context.Context, req exec.Request) (*remoteJob, error) {
	ar, err := execRequest(req, true)
	if err != nil {
		return nil, err
	}
	j, err := r.ws.StartJob(ctx, ar)
	if err != nil {
		return nil, errorOf(err, "cwd", req.Cwd, fs.ErrNotExist)
	}
	return r.job(j.ID), nil
}

// Jobs lists the workspace's jobs (GET .../jobs), oldest first.
func (r *remote) Jobs() []*remoteJob {
	l, err := r.ws.Jobs(context.Background())
	if err != nil {
		r.t.Errorf("listing jobs: %v", err)
		return nil
	}
	out := make([]*remoteJob, len(l))
	for i, j := range l {
		out[i] = r.job(j.ID)
	}
	return out
}

// Job returns job id (GET .../jobs/{id}).
func (r *remote) Job(id string) (*remoteJob, error) {
	if _, err := r.ws.Job(context.Background(), id); err != nil {
		return nil, errorOf(err, "job", id, exec.ErrUnknownJob)
	}
	return r.job(id), nil
}

func (r *remote) ReadFile(ctx context.Context, p string) ([]byte, error) {
	data, err := r.ws.ReadFile(ctx, p)
	return data, r.fileErr(err, "read", p)
}

func (r *remote) Read(ctx context.Context, p string, offset, limit int) (string, error) {
	if offset < 0 || limit < 0 {
		// The query cannot carry them: the API's own check, client side.
		return "", fmt.Errorf("read %s: offset %d limit %d: %w", p, offset, limit, exec.ErrInvalid)
	}
	nr, err := r.ws.Read(ctx, p, offset, limit)
	return nr.Content, r.fileErr(err, "read", p)
}

func (r *remote) WriteFile(ctx context.Context, p string, data []byte) error {
	return r.fileErr(r.ws.WriteFile(ctx, p, data), "write", p)
}

func (r *remote) Edit(ctx context.Context, p, oldStr, newStr string, replaceAll bool) (int, error) {
	n, err := r.ws.Edit(ctx, api.Edit{Path: p, Old: oldStr, New: newStr, ReplaceAll: replaceAll})
	return n, r.fileErr(err, "edit", p)
}

// fileInfo converts an API file description.
func fileInfo(fi api.FileInfo) exec.FileInfo {
	types := map[string]exec.FileType{"file": exec.TypeFile, "dir": exec.TypeDir, "symlink": exec.TypeSymlink}
	t, ok := types[fi.Type]
	if !ok {
		t = exec.TypeOther
	}
	return exec.FileInfo{Path: fi.Path, Name: fi.Name, Type: t, Size: fi.Size, Mode: fs.FileMode(fi.Mode), ModTime: fi.ModTime}
}

func (r *remote) Stat(ctx context.Context, p string) (exec.FileInfo, error) {
	fi, err := r.ws.Stat(ctx, p)
	if err != nil {
		return exec.FileInfo{}, r.fileErr(err, "stat", p)
	}
	return fileInfo(fi), nil
}

func (r *remote) Exists(ctx context.Context, p string) (bool, error) {
	ok, err := r.ws.Exists(ctx, p)
	return ok, r.fileErr(err, "exists", p)
}

func (r *remote) List(ctx context.Context, p string) ([]exec.FileInfo, error) {
	l, err := r.ws.List(ctx, p, false)
	if err != nil {
		return nil, r.fileErr(err, "list", p)
	}
	out := make([]exec.FileInfo, len(l.Entries))
	for i, e := range l.Entries {
		out[i] = fileInfo(e)
	}
	return out, nil
}

func (r *remote) Mkdir(ctx context.Context, p string, parents bool) error {
	return r.fileErr(r.ws.Mkdir(ctx, p, parents), "mkdir", p)
}

func (r *remote) Remove(ctx context.Context, p string, recursive bool) error {
	return r.fileErr(r.ws.Remove(ctx, p, recursive), "remove", p)
}

func (r *remote) Rename(ctx context.Context, from, to string) error {
	return r.fileErr(r.ws.Rename(ctx, from, to), "rename", from+" -> "+to)
}

func (r *remote) Copy(ctx context.Context, from, to string) error {
	return r.fileErr(r.ws.Copy(ctx, from, to), "copy", from+" -> "+to)
}

func (r *remote) Glob(ctx context.Context, pattern string) ([]string, error) {
	paths, err := r.ws.Glob(ctx, api.Glob{Pattern: pattern})
	return paths, r.fileErr(err, "glob", pattern)
}

func (r *remote) Grep(ctx context.Context, pattern string, o exec.GrepOptions) (*exec.GrepResult, error) {
	g, err := r.ws.Grep(ctx, api.Grep{Pattern: pattern, Path: o.Path, Glob: o.Glob, Literal: o.Literal, IgnoreCase: o.IgnoreCase, MaxResults: o.MaxResults})
	if err != nil {
		return nil, r.fileErr(err, "grep", o.Path)
	}
	res := &exec.GrepResult{Truncated: g.Truncated}
	for _, m := range g.Matches {
		res.Matches = append(res.Matches, exec.GrepMatch{Path: m.Path, Line: m.Line, Text: m.Text})
	}
	return res, nil
}

// Close deletes the workspace (its commands and jobs are killed); later
// calls fail with not_found, not exec.ErrClosed.
func (r *remote) Close() error {
	return errorOf(r.c.DeleteWorkspace(context.Background(), r.ws.Name()), "close", "", fs.ErrNotExist)
}

// remoteJob is an exectest.Job over the API's job routes.
type remoteJob struct {
	r  *remote
	id string

	once sync.Once
	done chan struct{} // closed by the watcher of Done once the job ended
}

func (j *remoteJob) ID() string { return j.id }

// Output is the job's output so far (GET .../jobs/{id}/output): the API
// serves the interleaved stream only, so Merged alone is set.
func (j *remoteJob) Output() exec.Output {
	o, err := j.r.ws.JobOutput(context.Background(), j.id, 0)
	if err != nil {
		j.r.t.Errorf("output of job %s: %v", j.id, err)
		return exec.Output{}
	}
	b, err := decode64(o.Output)
	if err != nil {
		j.r.t.Errorf("output of job %s: %v", j.id, err)
	}
	return exec.Output{Merged: b, Truncated: o.Truncated}
}

func (j *remoteJob) Running() bool {
	aj, err := j.r.ws.Job(context.Background(), j.id)
	if err != nil {
		j.r.t.Errorf("job %s: %v", j.id, err)
		return false
	}
	return aj.Running
}

// Done is closed once the job ended, as a goroutine that waits for it
// (started by the first call) sees.
func (j *remoteJob) Done() <-chan struct{} {
	j.once.Do(func() {
		j.done = make(chan struct{})
		go func() {
			defer close(j.done)
			_, _ = j.Wait(context.Background())
		}()
	})
	return j.done
}

// Wait waits for the job (POST .../jobs/{id}/wait, a minute at a time)
// until it ends or ctx does.
func (j *remoteJob) Wait(ctx context.Context) (*exec.Result, error) {
	for {
		secs := 60.0
		if dl, ok := ctx.Deadline(); ok {
			secs = min(secs, max(time.Until(dl).Seconds(), 0))
		}
		aj, err := j.r.ws.WaitJob(ctx, j.id, secs)
		if client.Code(err) == "timeout" && ctx.Err() == nil {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, errorOf(err, "job", j.id, exec.ErrUnknownJob)
		}
		if aj.Result == nil && aj.Error != nil {
			return nil, errorOf(&client.Error{Code: aj.Error.Code, Message: aj.Error.Message, Path: aj.Error.Path, Rule: aj.Error.Rule}, "job", j.id, fs.ErrNotExist)
		}
		if aj.Result == nil {
			return nil, fmt.Errorf("job %s ended without a result", j.id)
		}
		return result(aj.Result)
	}
}

// Kill kills the job (POST .../jobs/{id}/kill); killing an ended job is
// nothing.
func (j *remoteJob) Kill() {
	if _, err := j.r.ws.KillJob(context.Background(), j.id); err != nil {
		j.r.t.Errorf("kill job %s: %v", j.id, err)
	}
}
