package control

import (
	"context"
	"errors"
	"testing"

	"github.com/agentfs/agentfs/fs/changefeed"
)

// feedBackend is a Backend with a change feed.
type feedBackend struct {
	fakeBackend
	f *changefeed.Feed
}

func (b *feedBackend) Changes() *changefeed.Feed { return b.f }

func TestChanges(t *testing.T) {
	ctx := context.Background()
	b := &feedBackend{f: changefeed.New()}
	c := serve(t, t.TempDir(), b, nil)
	s, err := c.Changes(ctx, changefeed.Options{Path: "src"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	// Subscribed once Changes returned: nothing recorded after is missed.
	b.f.Record(changefeed.OpCreated, "doc", changefeed.TypeFile)
	b.f.Record(changefeed.OpCreated, "src/a.go", changefeed.TypeFile)
	ev, err := s.Next()
	if err != nil || ev.Op != changefeed.OpCreated || ev.Path != "src/a.go" || ev.ID != b.f.Epoch()+":2" {
		t.Fatalf("%+v, %v", ev, err)
	}
	b.f.Close("unmounted")
	if _, err := s.Next(); !errors.Is(err, changefeed.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}

	if _, err := c.Changes(ctx, changefeed.Options{Since: "nonsense"}); !errors.Is(err, changefeed.ErrBadID) {
		t.Errorf("bad since: %v", err)
	}
	plain := serve(t, t.TempDir(), &fakeBackend{}, nil)
	if _, err := plain.Changes(ctx, changefeed.Options{}); !errors.Is(err, ErrNoChanges) {
		t.Errorf("a backend without a feed: %v", err)
	}
}
