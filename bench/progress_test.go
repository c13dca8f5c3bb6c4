package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := NewProgressLine(&b)
	show := BenchProgress(p)
	show(Progress{Done: 4, Total: 42, Repeat: 2, Repeats: 3, Workload: "git", Target: "/tmp/b"})
	p.Set(strings.Repeat("x", 400))
	p.Clear()
	got := b.String()
	want := "\r\x1b[K[5/42] repeat 2/3: git in /tmp/b" + "\r\x1b[K" + strings.Repeat("x", 149) + "…" + "\r\x1b[K"
	if got != want {
		t.Errorf("progress output:\n got %q\nwant %q", got, want)
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "not-a-tty")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is reported as a terminal")
	}
}
