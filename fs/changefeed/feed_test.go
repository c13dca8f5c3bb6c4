package changefeed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// next reads one event, failing the test after a second.
func next(t *testing.T, s *Subscription) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return ev
}

// none checks that no event is waiting.
func none(t *testing.T, s *Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ev, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %+v, %v; want nothing", ev, err)
	}
}

func subscribe(t *testing.T, f *Feed, o Options) *Subscription {
	t.Helper()
	s, err := f.Subscribe(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func want(t *testing.T, ev Event, op, path string) {
	t.Helper()
	if ev.Op != op || ev.Path != path {
		t.Fatalf("got %+v, want %s %s", ev, op, path)
	}
}

func TestInactiveFeedRecordsNothing(t *testing.T) {
	f := New()
	f.Record(OpCreated, "a", TypeFile)
	if f.Active() {
		t.Fatal("active before any subscriber")
	}
	s := subscribe(t, f, Options{Since: f.Epoch() + ":0"})
	f.Record(OpCreated, "b", TypeFile)
	ev := next(t, s)
	want(t, ev, OpCreated, "b")
	if ev.ID != f.Epoch()+":1" || ev.Type != TypeFile || ev.Time.IsZero() {
		t.Fatalf("event %+v", ev)
	}
}

func TestResume(t *testing.T) {
	f := New()
	live := subscribe(t, f, Options{})
	for i := range 10 {
		f.Record(OpCreated, fmt.Sprint("f", i), TypeFile)
	}
	var ids []string
	for i := range 10 {
		ev := next(t, live)
		want(t, ev, OpCreated, fmt.Sprint("f", i))
		ids = append(ids, ev.ID)
	}
	t.Run("AfterAnID", func(t *testing.T) {
		s := subscribe(t, f, Options{Since: ids[6]})
		want(t, next(t, s), OpCreated, "f7")
		want(t, next(t, s), OpCreated, "f8")
		want(t, next(t, s), OpCreated, "f9")
		none(t, s)
	})
	t.Run("UnknownIDResets", func(t *testing.T) {
		for _, since := range []string{"otherepoch:3", f.Epoch() + ":99"} {
			s := subscribe(t, f, Options{Since: since})
			ev := next(t, s)
			if ev.Op != OpReset || ev.Reason != ReasonUnknownID || ev.ID != ids[9] {
				t.Fatalf("since %s: %+v, want a reset at %s", since, ev, ids[9])
			}
			none(t, s)
			// Resuming from the reset's ID repeats nothing.
			again := subscribe(t, f, Options{Since: ev.ID})
			none(t, again)
		}
	})
	t.Run("BadID", func(t *testing.T) {
		for _, since := range []string{"x", ":1", "e:z"} {
			if _, err := f.Subscribe(Options{Since: since}); !errors.Is(err, ErrBadID) {
				t.Errorf("since %q: %v", since, err)
			}
		}
	})
	t.Run("TooOld", func(t *testing.T) {
		for i := range RingSize {
			f.Record(OpModified, fmt.Sprint("g", i), TypeFile)
		}
		s := subscribe(t, f, Options{Since: ids[0]})
		if ev := next(t, s); ev.Op != OpReset || ev.Reason != ReasonUnknownID {
			t.Fatalf("%+v", ev)
		}
		s = subscribe(t, f, Options{Since: ids[9]}) // exactly the oldest kept is next
		want(t, next(t, s), OpModified, "g0")
	})
}

func TestFilter(t *testing.T) {
	f := New()
	s := subscribe(t, f, Options{Path: "src/pkg"})
	f.Record(OpCreated, "src/pkgx", TypeFile) // a sibling with the same prefix
	f.Record(OpCreated, "other", TypeFile)
	f.Record(OpModified, "src", TypeDir) // an ancestor's attributes
	f.Record(OpCreated, "src/pkg", TypeDir)
	f.Record(OpCreated, "src/pkg/a.go", TypeFile)
	f.Record(OpDeleted, "src", TypeDir) // takes the subtree
	f.Reset(ReasonReplaced)
	want(t, next(t, s), OpCreated, "src/pkg")
	want(t, next(t, s), OpCreated, "src/pkg/a.go")
	want(t, next(t, s), OpDeleted, "src")
	if ev := next(t, s); ev.Op != OpReset || ev.Reason != ReasonReplaced {
		t.Fatalf("%+v", ev)
	}
	none(t, s)
}

func TestResetsCoalesce(t *testing.T) {
	f := New()
	s := subscribe(t, f, Options{})
	f.Reset(ReasonReplaced)
	f.Reset(ReasonReplaced)
	f.Record(OpCreated, "a", TypeFile)
	f.Reset(ReasonReplaced)
	want(t, next(t, s), OpReset, "")
	want(t, next(t, s), OpCreated, "a")
	want(t, next(t, s), OpReset, "")
	none(t, s)
}

// TestSlowSubscriber: a subscriber that does not read never blocks
// Record; once it falls behind the ring it gets a reset and goes on live.
func TestSlowSubscriber(t *testing.T) {
	f := New()
	slow := subscribe(t, f, Options{})
	done := make(chan struct{})
	go func() {
		for i := range 3 * RingSize {
			f.Record(OpCreated, fmt.Sprint("f", i), TypeFile)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Record blocked on a subscriber that does not read")
	}
	ev := next(t, slow)
	if ev.Op != OpReset || ev.Reason != ReasonOverflow || ev.ID != f.Epoch()+fmt.Sprint(":", 3*RingSize) {
		t.Fatalf("%+v", ev)
	}
	none(t, slow)
	f.Record(OpCreated, "live", TypeFile)
	want(t, next(t, slow), OpCreated, "live")
}

func TestCloseEndsAfterTheRest(t *testing.T) {
	f := New()
	s := subscribe(t, f, Options{})
	f.Record(OpCreated, "a", TypeFile)
	f.Close("unmounted")
	f.Record(OpCreated, "b", TypeFile)
	want(t, next(t, s), OpCreated, "a")
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "unmounted") {
		t.Fatalf("after close: %v", err)
	}
	late := subscribe(t, f, Options{})
	if _, err := late.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscribed after close: %v", err)
	}
}

// TestConcurrentOrder: events of one recorder reach every subscriber in
// order, under the race detector.
func TestConcurrentOrder(t *testing.T) {
	f := New()
	const writers, each = 4, 500
	subs := make([]*Subscription, 3)
	for i := range subs {
		subs[i] = subscribe(t, f, Options{})
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				f.Record(OpCreated, fmt.Sprintf("w%d/%d", w, i), TypeFile)
			}
		}()
	}
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := map[string]int{}
			for range writers * each {
				ev, err := s.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				var w, i int
				if _, err := fmt.Sscanf(ev.Path, "w%d/%d", &w, &i); err != nil {
					t.Error(err)
					return
				}
				k := fmt.Sprint(w)
				if prev, ok := last[k]; ok && i != prev+1 {
					t.Errorf("writer %d: %d after %d", w, i, prev)
				}
				last[k] = i
			}
		}()
	}
	wg.Wait()
}
