package cache

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// recordHandler keeps every record it is given, at every level.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
	attrs   []slog.Attr
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.records = append(h.records, r)
	return nil
}

func (h *recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{h: h, attrs: as}
}

func (h *recordHandler) WithGroup(string) slog.Handler { return h }

// withAttrs is recordHandler with attributes added by Logger.With.
type withAttrs struct {
	h     *recordHandler
	attrs []slog.Attr
}

func (w *withAttrs) Enabled(ctx context.Context, l slog.Level) bool { return true }
func (w *withAttrs) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(w.attrs...)
	return w.h.Handle(ctx, r)
}
func (w *withAttrs) WithAttrs(as []slog.Attr) slog.Handler {
	return &withAttrs{h: w.h, attrs: append(append([]slog.Attr{}, w.attrs...), as...)}
}
func (w *withAttrs) WithGroup(string) slog.Handler { return w }

// badger returns the records that carry component=badger.
func (h *recordHandler) badger() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.records {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "component" && a.Value.String() == "badger" {
				out = append(out, r)
				return false
			}
			return true
		})
	}
	return out
}

func TestBadgerLogLevels(t *testing.T) {
	h := &recordHandler{}
	b := newBadgerLog(slog.New(h))
	b.Errorf("value log %s is corrupt\n", "000001.vlog")
	b.Warningf("slow flush")
	b.Infof("tables opened")
	b.Debugf("compaction")
	got := h.badger()
	want := []struct {
		level slog.Level
		msg   string
	}{
		{slog.LevelError, "value log 000001.vlog is corrupt"},
		{slog.LevelWarn, "slow flush"},
		{slog.LevelDebug, "tables opened"},
		{slog.LevelDebug, "compaction"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d badger records, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].Level != w.level || got[i].Message != w.msg {
			t.Errorf("record %d: %v %q, want %v %q", i, got[i].Level, got[i].Message, w.level, w.msg)
		}
	}
}

func TestBadgerLogSkipsDisabledLevels(t *testing.T) {
	var called bool
	b := newBadgerLog(slog.New(slog.NewTextHandler(discardWriter{}, &slog.HandlerOptions{Level: slog.LevelInfo})))
	b.Debugf("%v", stringer(func() string { called = true; return "x" }))
	if called {
		t.Error("a debug line was formatted though the handler drops debug")
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

type stringer func() string

func (s stringer) String() string { return s() }

// TestOpenLogsBadger checks that Open hands Badger the volume's logger:
// Badger logs while it opens its database, and those lines must reach the
// volume's handler (they were discarded once, errors included).
func TestOpenLogsBadger(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	h := &recordHandler{}
	v := openVolume(t, url, "", func(o *Options) { o.Logger = slog.New(h) })
	if err := v.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(h.badger()) == 0 {
		t.Error("no record from Badger reached the volume's logger")
	}
}
