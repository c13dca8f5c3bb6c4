package fs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/fs/changefeed"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
)

// feedReader reads a mount's change feed in the background.
type feedReader struct {
	s  *control.ChangeStream
	ch chan changefeed.Event
	// err receives the error that ended the stream.
	err chan error
}

func readFeed(t *testing.T, c *control.Client, o changefeed.Options) *feedReader {
	t.Helper()
	s, err := c.Changes(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	r := &feedReader{s: s, ch: make(chan changefeed.Event, 1024), err: make(chan error, 1)}
	go func() {
		for {
			ev, err := s.Next()
			if err != nil {
				r.err <- err
				close(r.ch)
				return
			}
			r.ch <- ev
		}
	}()
	t.Cleanup(func() { _ = s.Close() })
	return r
}

// until returns the events (as "op type path", consecutive repeats
// collapsed) up to the creation of marker, which ends every step.
func (r *feedReader) until(t *testing.T, marker string) []string {
	t.Helper()
	var out []string
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-r.ch:
			if !ok {
				t.Fatalf("feed ended (%v) before %s; got %q", <-r.err, marker, out)
			}
			if ev.Path == marker && ev.Op == changefeed.OpCreated {
				return out
			}
			s := ev.Op + " " + ev.Type + " " + ev.Path
			if ev.Op == changefeed.OpReset {
				s = "reset " + ev.Reason
			}
			if len(out) == 0 || out[len(out)-1] != s {
				out = append(out, s)
			}
		case <-timeout:
			t.Fatalf("no %s after %q", marker, out)
		}
	}
}

// TestChangeFeed checks the events the mount reports for each kind of
// change, with a path filter and on resume.
func TestChangeFeed(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	c := m.Client(t)
	all := readFeed(t, c, changefeed.Options{})
	sub := readFeed(t, c, changefeed.Options{Path: "d"})
	p := func(name string) string { return filepath.Join(m.Dir, name) }
	step := 0
	// do runs f, then creates a marker file, and returns the events
	// before the marker on feed r.
	do := func(r *feedReader, f func() error) []string {
		t.Helper()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		step++
		marker := fmt.Sprintf("marker%d", step)
		if err := os.WriteFile(p(marker), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return r.until(t, marker)
	}
	check := func(name string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: got\n\t%s\nwant\n\t%s", name, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	check("mkdir, write, append", do(all, func() error {
		if err := os.MkdirAll(p("d/e"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p("d/a.txt"), []byte("one"), 0o644); err != nil {
			return err
		}
		f, err := os.OpenFile(p("d/a.txt"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		for range 10 {
			if _, err := f.WriteString("more"); err != nil {
				return err
			}
		}
		return f.Close()
	}), "created dir d", "created dir d/e", "created file d/a.txt", "modified file d/a.txt")
	check("a read changes nothing", do(all, func() error {
		_, err := os.ReadFile(p("d/a.txt"))
		return err
	}))
	// A file with two names is reported under the one the kernel looked
	// up last ("hard", not the "d/e/b.txt" chmod named).
	check("rename, link, symlink, chmod, truncate", do(all, func() error {
		if err := os.Rename(p("d/a.txt"), p("d/e/b.txt")); err != nil {
			return err
		}
		if err := os.Link(p("d/e/b.txt"), p("hard")); err != nil {
			return err
		}
		if err := os.Symlink("d/e/b.txt", p("sym")); err != nil {
			return err
		}
		if err := os.Chmod(p("d/e/b.txt"), 0o600); err != nil {
			return err
		}
		return os.Truncate(p("sym"), 1) // through the symlink: the file
	}), "deleted file d/a.txt", "created file d/e/b.txt", "created file hard", "created symlink sym",
		"modified file hard")
	check("exchange, unlink, rmdir, rename of a directory", do(all, func() error {
		if err := os.WriteFile(p("d/x"), nil, 0o644); err != nil {
			return err
		}
		if err := unix.Renameat2(unix.AT_FDCWD, p("d/x"), unix.AT_FDCWD, p("d/e"), unix.RENAME_EXCHANGE); err != nil {
			return err
		}
		if err := os.Remove(p("hard")); err != nil {
			return err
		}
		if err := os.Remove(p("d/e")); err != nil { // the file now
			return err
		}
		if err := os.Rename(p("d/x"), p("f")); err != nil { // the directory now
			return err
		}
		return os.RemoveAll(p("f"))
	}), "created file d/x", "deleted file d/x", "deleted dir d/e", "created dir d/x", "created file d/e",
		"deleted file hard", "deleted file d/e", "deleted dir d/x", "created dir f", "deleted file f/b.txt", "deleted dir f")

	// The filtered feed saw d and below only (and no markers: it stops at
	// the last one created under d).
	if err := os.WriteFile(p("d/end"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	check("filtered", sub.until(t, "d/end"), "created dir d", "created dir d/e", "created file d/a.txt",
		"modified file d/a.txt", "deleted file d/a.txt", "created file d/e/b.txt",
		"created file d/x", "deleted file d/x", "deleted dir d/e", "created dir d/x", "created file d/e",
		"deleted file d/e", "deleted dir d/x")

	t.Run("Resume", func(t *testing.T) {
		r := readFeed(t, c, changefeed.Options{})
		if err := os.WriteFile(p("r1"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var id string
		select {
		case ev := <-r.ch:
			id = ev.ID
		case <-time.After(20 * time.Second):
			t.Fatal("no event")
		}
		_ = r.s.Close()
		if err := os.Mkdir(p("r2"), 0o755); err != nil {
			t.Fatal(err)
		}
		again := readFeed(t, c, changefeed.Options{Since: id})
		if err := os.WriteFile(p("r3"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		check("resumed", again.until(t, "r3"), "created dir r2")
		old := readFeed(t, c, changefeed.Options{Since: "0000:1"})
		if err := os.WriteFile(p("r4"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		check("unknown id", old.until(t, "r4"), "reset unknown_id")
	})

	t.Run("EndsAtUnmount", func(t *testing.T) {
		m.Unmount(t)
		select {
		case err := <-all.err:
			if !errors.Is(err, changefeed.ErrClosed) {
				t.Fatalf("stream ended with %v, want ErrClosed", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the stream did not end at unmount")
		}
	})
}
