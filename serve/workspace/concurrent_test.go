package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/serve/workspace"
)

// TestConcurrentUse: goroutines acquire, write and release workspaces at
// random while the cap evicts and idle scans unmount; every write is
// there afterwards, and at most MaxMounted servers ran at the end.
func TestConcurrentUse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config()
	cfg.MaxMounted = 2
	m := e.open(cfg)
	names := []string{"a", "b", "c"}
	for _, n := range names {
		create(t, m, workspace.CreateRequest{Name: n})
	}
	const workers, rounds = 3, 6
	stop := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				e.clock.Advance(20 * time.Second)
				m.Scan(ctx)
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				name := names[(w+r)%len(names)]
				var h *workspace.Handle
				var err error
				for range 200 {
					if h, err = m.Acquire(ctx, name); !errors.Is(err, workspace.ErrBusy) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: Acquire(%s): %w", w, r, name, err)
					return
				}
				err = h.Backend.WriteFile(ctx, fmt.Sprintf("w%d-r%d", w, r), []byte(name))
				h.Release()
				if err != nil {
					errs <- fmt.Errorf("worker %d round %d: write in %s: %w", w, r, name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-scanned
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(e.serverPIDs()); n > cfg.MaxMounted {
		t.Errorf("%d mount servers run, cap %d", n, cfg.MaxMounted)
	}
	if n := m.Mounted(); n > cfg.MaxMounted {
		t.Errorf("Mounted() = %d, cap %d", n, cfg.MaxMounted)
	}
	for w := range workers {
		for r := range rounds {
			name := names[(w+r)%len(names)]
			h := acquire(t, m, name)
			if got := readFile(t, h, fmt.Sprintf("w%d-r%d", w, r)); got != name {
				t.Errorf("w%d-r%d in %s = %q", w, r, name, got)
			}
			h.Release()
		}
	}
}
