package serve

import (
	"sync"

	"github.com/agentfs/agentfs/serve/apierr"
)

// limiter counts the commands running in each workspace and the jobs
// running in the server.
type limiter struct {
	maxCommands, maxJobs int

	mu       sync.Mutex
	commands map[string]int // guarded by mu; by workspace
	jobs     int            // guarded by mu
}

func newLimiter(maxCommands, maxJobs int) *limiter {
	return &limiter{maxCommands: maxCommands, maxJobs: maxJobs, commands: map[string]int{}}
}

// acquire reserves a command slot in workspace ws (and a job slot when
// job is set), or fails with busy; release gives them back, once.
func (l *limiter) acquire(ws string, job bool) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.commands[ws] >= l.maxCommands {
		return nil, apierr.New(apierr.Busy, "workspace %s already runs %d commands (the cap); retry when one ends", ws, l.maxCommands)
	}
	if job && l.jobs >= l.maxJobs {
		return nil, apierr.New(apierr.Busy, "the server already runs %d background jobs (the cap); retry when one ends", l.maxJobs)
	}
	l.commands[ws]++
	if job {
		l.jobs++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.commands[ws]--; l.commands[ws] == 0 {
				delete(l.commands, ws)
			}
			if job {
				l.jobs--
			}
		})
	}, nil
}

// running returns the commands running in every workspace and the jobs.
func (l *limiter) running() (commands, jobs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.commands {
		commands += n
	}
	return commands, l.jobs
}
