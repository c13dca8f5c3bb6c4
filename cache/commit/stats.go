package commit

import (
	"sync"
	"time"
)

// Stats records a volume's checkpoints and writer-lease renewals, for the
// volume's status. It is safe for concurrent use; its mutex is a leaf.
type Stats struct {
	mu sync.Mutex
	r  Report // guarded by mu
}

// Report is what Stats recorded.
type Report struct {
	Last    time.Time     // when the last checkpoint ended (zero: none yet)
	LastDur time.Duration // how long it took
	LastErr string        // its error; "" if it committed
	Puts    int64         // the packs it uploaded
	Bytes   int64         // their bytes
	Commits int64         // the checkpoints that committed
	// LeaseErr is the last lease renewal's error; "" if it succeeded.
	LeaseErr string
}

// Checkpoint records a checkpoint that started at start, ended at end,
// uploaded through up, and failed with err (nil: it committed).
func (s *Stats) Checkpoint(start, end time.Time, up *Uploader, err error) {
	puts, bytes := up.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.Last, s.r.LastDur, s.r.Puts, s.r.Bytes = end, end.Sub(start), puts, bytes
	if err != nil {
		s.r.LastErr = err.Error()
		return
	}
	s.r.LastErr = ""
	s.r.Commits++
}

// Lease records a renewal of the writer lease that failed with err (nil:
// it succeeded).
func (s *Stats) Lease(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.LeaseErr = ""
	if err != nil {
		s.r.LeaseErr = err.Error()
	}
}

// Report returns what s recorded.
func (s *Stats) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r
}
