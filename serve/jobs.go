package serve

// Lock order: jobTable.mu only; no lock is held while a job is waited on
// or killed.

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/apierr"
	"github.com/agentfs/agentfs/serve/workspace"
)

// maxEndedJobs is how many ended jobs a workspace keeps for get, wait and
// output; older ones are forgotten.
const maxEndedJobs = 100

// job is a background command of a workspace. It holds the workspace's
// Handle (and a command and a job slot) until it ends.
type job struct {
	id        string
	workspace string
	encoding  string
	j         *exec.Job
	// freed is closed once the ended job has given back its command slot
	// and its hold on the workspace, so that a client told the job ended
	// (wait, kill) may start another command at once.
	freed chan struct{}
}

// jobTable holds the jobs of every workspace under server-wide ids.
type jobTable struct {
	mu   sync.Mutex
	next int                        // guarded by mu
	jobs map[string]map[string]*job // guarded by mu; workspace -> id -> job
}

func newJobTable() *jobTable { return &jobTable{jobs: map[string]map[string]*job{}} }

// add registers a started job and returns it with its id.
func (t *jobTable) add(ws, enc string, j *exec.Job) *job {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	jb := &job{id: "job-" + strconv.Itoa(t.next), workspace: ws, encoding: enc, j: j, freed: make(chan struct{})}
	if t.jobs[ws] == nil {
		t.jobs[ws] = map[string]*job{}
	}
	t.jobs[ws][jb.id] = jb
	t.pruneLocked(ws)
	return jb
}

// pruneLocked forgets the oldest ended jobs of ws past maxEndedJobs.
func (t *jobTable) pruneLocked(ws string) {
	var ended []*job
	for _, jb := range t.jobs[ws] {
		if !jb.j.Running() {
			ended = append(ended, jb)
		}
	}
	if len(ended) <= maxEndedJobs {
		return
	}
	sort.Slice(ended, func(a, b int) bool { return ended[a].j.Started().Before(ended[b].j.Started()) })
	for _, jb := range ended[:len(ended)-maxEndedJobs] {
		delete(t.jobs[ws], jb.id)
	}
}

func (t *jobTable) get(ws, id string) (*job, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	jb := t.jobs[ws][id]
	if jb == nil {
		return nil, apierr.New(apierr.NotFound, "workspace %s has no job %q", ws, id)
	}
	return jb, nil
}

func (t *jobTable) list(ws string) []*job {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*job, 0, len(t.jobs[ws]))
	for _, jb := range t.jobs[ws] {
		out = append(out, jb)
	}
	sort.Slice(out, func(a, b int) bool { return jobNumber(out[a].id) < jobNumber(out[b].id) })
	return out
}

func jobNumber(id string) int {
	n, _ := strconv.Atoi(id[len("job-"):])
	return n
}

// killWorkspace kills the running jobs of ws and forgets all of them.
func (t *jobTable) killWorkspace(ws string) {
	t.mu.Lock()
	jobs := t.jobs[ws]
	delete(t.jobs, ws)
	t.mu.Unlock()
	killJobs(jobs)
}

// killAll kills every running job.
func (t *jobTable) killAll() {
	t.mu.Lock()
	all := t.jobs
	t.jobs = map[string]map[string]*job{}
	t.mu.Unlock()
	for _, jobs := range all {
		killJobs(jobs)
	}
}

func killJobs(jobs map[string]*job) {
	var wg sync.WaitGroup
	for _, jb := range jobs {
		wg.Add(1)
		go func() { defer wg.Done(); jb.j.Kill() }()
	}
	wg.Wait()
}

// info describes jb; with result, an ended job's result is included.
func (jb *job) info(result bool) api.Job {
	in := api.Job{ID: jb.id, Command: jb.j.Command(), Started: jb.j.Started().UTC(), Running: jb.j.Running()}
	if in.Running {
		return in
	}
	res, err := jb.j.Wait(context.Background())
	if res != nil {
		code := res.ExitCode
		in.ExitCode = &code
		if result {
			in.Result = newExecResult(res, jb.encoding)
		}
	}
	if err := execError(err); err != nil {
		e := apierr.From(err, "")
		in.Error = &api.Error{Code: string(e.Code), Message: e.Message}
	}
	return in
}

// startJob answers POST /v1/workspaces/{name}/jobs: the command starts in
// the background and the job is returned at once (201).
func (s *Server) startJob(c *call) error {
	req, er, b, release, err := s.command(c, true)
	if err != nil {
		return err
	}
	j, err := b.Start(c.r.Context(), er)
	if err != nil {
		release()
		return err
	}
	jb := s.jobs.add(c.ws.Name, req.Encoding, j)
	h := c.hold()
	go func(h *workspace.Handle) {
		<-j.Done()
		release()
		h.Release()
		close(jb.freed)
	}(h)
	writeJSON(c.w, http.StatusCreated, jb.info(false))
	return nil
}

// listJobs answers GET /v1/workspaces/{name}/jobs.
func (s *Server) listJobs(c *call) error {
	out := []api.Job{}
	for _, jb := range s.jobs.list(c.r.PathValue("name")) {
		out = append(out, jb.info(false))
	}
	writeJSON(c.w, http.StatusOK, api.JobList{Jobs: out})
	return nil
}

// getJob answers GET /v1/workspaces/{name}/jobs/{id}.
func (s *Server) getJob(c *call) error {
	jb, err := s.jobs.get(c.r.PathValue("name"), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, jb.info(true))
	return nil
}

// waitJob answers POST /v1/workspaces/{name}/jobs/{id}/wait?timeout=S:
// the job once it ended, or, when the timeout (default 30 s) passes
// first, a timeout error (the job keeps running).
func (s *Server) waitJob(c *call) error {
	jb, err := s.jobs.get(c.r.PathValue("name"), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	secs := 30.0
	if v := c.r.URL.Query().Get("timeout"); v != "" {
		// NaN and huge values are refused before they become a Duration.
		if secs, err = strconv.ParseFloat(v, 64); err != nil || !(secs >= 0 && secs <= MaxExecTimeout.Seconds()) {
			return invalid("timeout=%q: seconds, from 0 to %v", v, MaxExecTimeout.Seconds())
		}
	}
	d := time.Duration(secs * float64(time.Second))
	ctx, cancel := s.deadline(c, d)
	defer cancel()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-jb.freed:
	case <-timer.C:
		return apierr.New(apierr.Timeout, "job %s still runs after %v s", jb.id, secs)
	case <-ctx.Done():
		return ctx.Err()
	}
	writeJSON(c.w, http.StatusOK, jb.info(true))
	return nil
}

// killJob answers POST /v1/workspaces/{name}/jobs/{id}/kill: the job's
// process tree is killed and the ended job returned.
func (s *Server) killJob(c *call) error {
	jb, err := s.jobs.get(c.r.PathValue("name"), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	jb.j.Kill()
	select {
	case <-jb.freed:
	case <-c.r.Context().Done():
		return c.r.Context().Err()
	}
	writeJSON(c.w, http.StatusOK, jb.info(true))
	return nil
}

// jobOutput answers GET /v1/workspaces/{name}/jobs/{id}/output?offset=N:
// the output (stdout and stderr interleaved) from byte offset N, and the
// offset to ask for next.
func (s *Server) jobOutput(c *call) error {
	jb, err := s.jobs.get(c.r.PathValue("name"), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	off, err := queryInt(c.r, "offset", 0)
	if err != nil {
		return err
	}
	running := jb.j.Running()
	out := jb.j.Output()
	if off > len(out.Merged) {
		return invalid("offset %d: the job's output has %d bytes so far", off, len(out.Merged))
	}
	writeJSON(c.w, http.StatusOK, api.JobOutput{
		Output: encode(out.Merged[off:], jb.encoding), Offset: off, NextOffset: len(out.Merged),
		Encoding: jb.encoding, Truncated: out.Truncated, Running: running,
	})
	return nil
}
