package exec

import (
	"bytes"
	"io"
	"sync"
)

type streamID int

const (
	streamStdout streamID = iota
	streamStderr
)

// capture keeps a command's output up to a limit, for the Result and for a
// running job's Output, and forwards what it keeps to live writers.
type capture struct {
	limit           int64     // < 0: no limit
	keep            bool      // keep the output in the buffers
	liveOut, liveEr io.Writer // may be nil

	mu        sync.Mutex
	kept      int64        // guarded by mu; bytes passed under the limit (== merged.Len() when keep)
	truncated bool         // guarded by mu
	stdout    bytes.Buffer // guarded by mu
	stderr    bytes.Buffer // guarded by mu
	merged    bytes.Buffer // guarded by mu
}

func newCapture(limit int64, keep bool, liveOut, liveErr io.Writer) *capture {
	return &capture{limit: limit, keep: keep, liveOut: liveOut, liveEr: liveErr}
}

// stream returns a writer for one stream. Its Write never fails, so that a
// command never blocks or dies on a full or closed pipe because of the cap.
func (c *capture) stream(id streamID) io.Writer { return streamWriter{c, id} }

type streamWriter struct {
	c  *capture
	id streamID
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.c.write(w.id, p)
	return len(p), nil
}

func (c *capture) write(id streamID, p []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := p
	if c.limit >= 0 {
		room := c.limit - c.kept
		if room < 0 {
			room = 0
		}
		if int64(len(keep)) > room {
			keep = keep[:room]
			c.truncated = true
		}
	}
	if len(keep) == 0 {
		return
	}
	c.kept += int64(len(keep))
	live := c.liveOut
	if id == streamStderr {
		live = c.liveEr
	}
	if c.keep {
		c.merged.Write(keep)
		if id == streamStdout {
			c.stdout.Write(keep)
		} else {
			c.stderr.Write(keep)
		}
	}
	if live != nil {
		// Under mu, so live writers see the streams in the kept order.
		_, _ = live.Write(keep)
	}
}

// snapshot copies what was kept so far.
func (c *capture) snapshot() Output {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Output{
		Stdout:    bytes.Clone(c.stdout.Bytes()),
		Stderr:    bytes.Clone(c.stderr.Bytes()),
		Merged:    bytes.Clone(c.merged.Bytes()),
		Truncated: c.truncated,
	}
}
