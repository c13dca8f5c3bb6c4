package exec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMatchGlob(t *testing.T) {
	for _, tc := range []struct {
		pat, p string
		want   bool
	}{
		{"**", "a", true},
		{"**", "a/b/c", true},
		{"**/*.go", "x.go", true},
		{"**/*.go", "a/b/x.go", true},
		{"**/*.go", "a/b/x.txt", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/**", "a", true}, // ** matches zero directories too
		{"a/**", "a/x", true},
		{"**/**/z", "z", true},
		{"*.go", "a/x.go", false},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/b/c", false},
		{"[ab]?", "bz", true},
		{"[ab]?", "cz", false},
	} {
		if got := matchGlob(strings.Split(tc.pat, "/"), strings.Split(tc.p, "/")); got != tc.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tc.pat, tc.p, got, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	b, err := NewLocal(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { must(t, b.Close()) })
	must(t, os.MkdirAll(filepath.Join(dir, "a/b"), 0o755))
	must(t, os.Symlink("b", filepath.Join(dir, "a/lb")))
	must(t, os.Symlink("../a/lb", filepath.Join(dir, "a/chain")))
	must(t, os.Symlink("loop2", filepath.Join(dir, "loop1")))
	must(t, os.Symlink("loop1", filepath.Join(dir, "loop2")))
	for _, tc := range []struct {
		in     string
		follow bool
		want   string
	}{
		{"", true, "."},
		{".", true, "."},
		{"a/b/", true, "a/b"},
		{"a/./b/../b", true, "a/b"},
		{"a/lb", true, "a/b"},
		{"a/lb", false, "a/lb"},
		{"a/lb/x", false, "a/b/x"},
		{"a/chain/new/file", true, "a/b/new/file"},
		{"missing/../a", true, "a"},
		{"a//b", true, "a/b"},
	} {
		got, err := b.resolve("t", tc.in, tc.follow)
		if err != nil || got != tc.want {
			t.Errorf("resolve(%q, %v) = %q, %v; want %q", tc.in, tc.follow, got, err, tc.want)
		}
	}
	if _, err := b.resolve("t", "loop1", true); !errors.Is(err, ErrInvalid) {
		t.Errorf("symlink loop: %v", err)
	}
	if _, err := b.resolve("t", "a\x00b", true); !errors.Is(err, ErrInvalid) {
		t.Errorf("NUL: %v", err)
	}
	s, err := b.Scope("a/lb")
	if err != nil {
		t.Fatal(err)
	}
	if s.prefix != "a/b" {
		t.Errorf("scope prefix %q", s.prefix)
	}
	if got, err := s.resolve("t", "x/../y", true); err != nil || got != "a/b/y" || s.display(got) != "y" {
		t.Errorf("scoped resolve: %q %v", got, err)
	}
	var pe *PathError
	_, err = s.resolve("read", "../x", true)
	if !errors.As(err, &pe) || pe.Op != "read" || pe.Path != "../x" || !strings.Contains(err.Error(), "../x") {
		t.Errorf("PathError: %#v", err)
	}
}

func TestWalkTracker(t *testing.T) {
	dir := t.TempDir()
	tr := &WalkTracker{Root: dir}
	ctx := context.Background()
	must(t, os.MkdirAll(filepath.Join(dir, "s/d"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "s/f"), []byte("1"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "s/g"), []byte("1"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "s/h"), []byte("1"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "outside"), []byte("1"), 0o644))
	m, err := tr.Begin(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	// Replace f by a file with the same size and times (another inode),
	// turn g into a directory, chmod h, touch outside.
	fi, _ := os.Stat(filepath.Join(dir, "s/f"))
	must(t, os.WriteFile(filepath.Join(dir, "s/f.new"), []byte("2"), 0o644))
	must(t, os.Chtimes(filepath.Join(dir, "s/f.new"), fi.ModTime(), fi.ModTime()))
	must(t, os.Rename(filepath.Join(dir, "s/f.new"), filepath.Join(dir, "s/f")))
	must(t, os.Remove(filepath.Join(dir, "s/g")))
	must(t, os.Mkdir(filepath.Join(dir, "s/g"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "s/h"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "outside"), []byte("22"), 0o644))
	must(t, os.Symlink("f", filepath.Join(dir, "s/d/l")))
	c, err := tr.Changes(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	want := &Changes{Created: []string{"d/l"}, Modified: []string{"f", "g", "h"}, Deleted: []string{}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("changes %+v, want %+v", c, want)
	}
	if _, err := tr.Changes(ctx, "not a mark"); !errors.Is(err, ErrInvalid) {
		t.Errorf("foreign mark: %v", err)
	}
	if _, err := tr.Begin(ctx, "missing"); err == nil {
		t.Error("Begin on a missing dir succeeded")
	}
}

// BenchmarkWalkTracker measures the default change list's cost per entry.
func BenchmarkWalkTracker(b *testing.B) {
	dir := b.TempDir()
	const n = 10000
	for i := range n {
		d := filepath.Join(dir, "d"+string(rune('a'+i%20)))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "f"+time.Duration(i).String()), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	tr := &WalkTracker{Root: dir}
	b.ResetTimer()
	for b.Loop() {
		m, err := tr.Begin(context.Background(), "")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tr.Changes(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n/1000, "µs/entry")
}

func TestCapture(t *testing.T) {
	c := newCapture(5, true, nil, nil)
	out, errw := c.stream(streamStdout), c.stream(streamStderr)
	if n, err := out.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	if n, err := errw.Write([]byte("def")); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	_, _ = out.Write([]byte("ghi"))
	o := c.snapshot()
	if string(o.Stdout) != "abc" || string(o.Stderr) != "de" || string(o.Merged) != "abcde" || !o.Truncated {
		t.Errorf("%+v", o)
	}
	u := newCapture(-1, true, nil, nil)
	_, _ = u.stream(streamStdout).Write(make([]byte, 10<<20))
	if o := u.snapshot(); len(o.Stdout) != 10<<20 || o.Truncated {
		t.Errorf("unlimited: %d %v", len(o.Stdout), o.Truncated)
	}
}

func TestCaptureDiscard(t *testing.T) {
	var live strings.Builder
	c := newCapture(4, false, &live, nil)
	_, _ = c.stream(streamStdout).Write([]byte("abcdef"))
	if o := c.snapshot(); len(o.Stdout)+len(o.Merged) != 0 || !o.Truncated || live.String() != "abcd" {
		t.Errorf("%+v live %q", o, live.String())
	}
}
