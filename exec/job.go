package exec

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Job is a command started in the background by Start. Its methods are safe
// for concurrent use.
type Job struct {
	id      string
	command string
	scope   string // root-relative scope of the backend that started it
	started time.Time
	r       *run
	cancel  context.CancelFunc // kills the job
	done    chan struct{}      // closed once res and err are set

	mu  sync.Mutex
	res *Result // guarded by mu; set once, before done is closed
	err error   // guarded by mu; set once, before done is closed
}

// Start launches req in the background and returns its Job at once. The
// same validation as Exec applies and its errors are returned here. ctx
// bounds only the start: the job runs until it exits, its timeout fires,
// Kill is called or the backend closes. When the job ends, its process tree
// is killed (as for Exec), then the sync barrier and the change list run,
// and Wait returns the Result. Jobs stay listed until the backend closes.
func (b *Backend) Start(ctx context.Context, req Request) (*Job, error) {
	r, err := b.launch(ctx, &req)
	if err != nil {
		return nil, err
	}
	jctx, cancel := context.WithCancel(context.Background())
	j := &Job{
		command: req.display(),
		scope:   b.prefix,
		started: r.start,
		r:       r,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	b.s.mu.Lock()
	b.s.nextJob++
	j.id = fmt.Sprintf("job-%d", b.s.nextJob)
	b.s.jobs[j.id] = j
	b.s.mu.Unlock()
	go func() {
		// Done after close(j.done): Close waits on the running group and
		// promises that every job has ended when it returns.
		defer b.s.running.Done()
		defer cancel()
		// A Kill (jctx's end) is the expected end of a job, not an error.
		res, err := r.finish(jctx, false)
		j.mu.Lock()
		j.res, j.err = res, err
		j.mu.Unlock()
		close(j.done)
	}()
	return j, nil
}

// ID is the job's identifier, "job-N", unique within its backend.
func (j *Job) ID() string { return j.id }

// Command is the job's command line (argv joined and quoted for display).
func (j *Job) Command() string { return j.command }

// Started is when the job's process started.
func (j *Job) Started() time.Time { return j.started }

// Done is closed when the job has ended and its Result is ready.
func (j *Job) Done() <-chan struct{} { return j.done }

// Running reports whether the job has not ended yet.
func (j *Job) Running() bool {
	select {
	case <-j.done:
		return false
	default:
		return true
	}
}

// Output returns what the job printed so far (the final output once it
// ended), capped like a Result's.
func (j *Job) Output() Output { return j.r.out.snapshot() }

// Wait blocks until the job ends and returns its Result and error, as Exec
// would (a Kill is not an error; the Result then reports the signal, 137).
// When ctx ends first, Wait returns ctx's error and the job keeps running.
func (j *Job) Wait(ctx context.Context) (*Result, error) {
	select {
	case <-j.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.res, j.err
}

// Kill kills the job's whole process tree and returns once the job has
// ended (its sync barrier and change list included); a failure to kill is
// reported by Wait. Killing a job that already ended does nothing.
func (j *Job) Kill() {
	j.cancel()
	<-j.done
}

// Jobs lists the jobs started through this backend or its scopes (all of
// them for the root backend), running or ended, in start order.
func (b *Backend) Jobs() []*Job {
	b.s.mu.Lock()
	var out []*Job
	for _, j := range b.s.jobs {
		if within(j.scope, b.prefix) {
			out = append(out, j)
		}
	}
	b.s.mu.Unlock()
	sort.Slice(out, func(a, c int) bool { return jobNumber(out[a].id) < jobNumber(out[c].id) })
	return out
}

// Job returns the job with that id, if it was started through this backend
// or its scopes; otherwise an error wrapping ErrUnknownJob.
func (b *Backend) Job(id string) (*Job, error) {
	b.s.mu.Lock()
	j, ok := b.s.jobs[id]
	b.s.mu.Unlock()
	if !ok || !within(j.scope, b.prefix) {
		return nil, fmt.Errorf("job %q: %w", id, ErrUnknownJob)
	}
	return j, nil
}
