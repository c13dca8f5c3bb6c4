package bench

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether f is a terminal (progress displays are
// written only to terminals).
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// ProgressLine draws a one-line progress display on a terminal, rewriting
// the line in place. It is safe for concurrent use; Clear erases the line.
type ProgressLine struct {
	mu sync.Mutex
	w  io.Writer // guarded by mu
}

// NewProgressLine returns a display that writes to w, which should be a
// terminal.
func NewProgressLine(w io.Writer) *ProgressLine { return &ProgressLine{w: w} }

// Set replaces the displayed line with text.
func (p *ProgressLine) Set(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprintf(p.w, "\r\x1b[K%s", truncate(text, 150)) // a display: a failed write loses nothing
}

// Clear erases the line.
func (p *ProgressLine) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprint(p.w, "\r\x1b[K")
}

// BenchProgress returns a Config.Progress function that shows bench's
// progress on p.
func BenchProgress(p *ProgressLine) func(Progress) {
	return func(g Progress) {
		p.Set(fmt.Sprintf("[%d/%d] repeat %d/%d: %s in %s", g.Done+1, g.Total, g.Repeat, g.Repeats, g.Workload, g.Target))
	}
}
