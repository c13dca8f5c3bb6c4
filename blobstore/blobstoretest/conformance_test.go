package blobstoretest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/blobstore/blobstoretest"
	"github.com/agentfs/agentfs/blobstore/faulty"
	"github.com/agentfs/agentfs/internal/testservices"
)

// open opens url for the duration of t.
func open(t *testing.T, rawURL string, opts blobstore.Options) *blobstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := blobstore.Open(ctx, rawURL, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", blobstore.DisplayURL(rawURL), err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestMem(t *testing.T) {
	t.Parallel()
	blobstoretest.Run(t, func(t *testing.T) *blobstore.Store {
		return open(t, "mem://", blobstore.Options{})
	})
}

func TestFile(t *testing.T) {
	t.Parallel()
	blobstoretest.Run(t, func(t *testing.T) *blobstore.Store {
		return open(t, "file://"+t.TempDir(), blobstore.Options{})
	})
}

// TestS3 runs the suite on a real MinIO server, a new bucket per check.
func TestS3(t *testing.T) {
	t.Parallel()
	testservices.StartMinIO(t) // keeps one server up for every subtest
	blobstoretest.Run(t, func(t *testing.T) *blobstore.Store {
		return open(t, testservices.StartMinIO(t), blobstore.Options{})
	})
}

// TestGCS runs the suite on the GCS emulator, a new bucket per check.
func TestGCS(t *testing.T) {
	t.Parallel()
	testservices.StartGCSEmulator(t) // keeps one emulator up for every subtest
	blobstoretest.Run(t, func(t *testing.T) *blobstore.Store {
		return open(t, testservices.StartGCSEmulator(t), blobstore.Options{})
	})
}

// TestPrefixed runs the suite on stores that live under a key prefix (made
// by Sub, and by the path of a URL), next to decoy objects just outside it
// (including a sibling whose name extends the prefix), which the suite's
// listings must not see. The prefix logic is Store's, the same for every
// driver; TestOpenS3OnMinIO checks a URL path prefix on S3.
func TestPrefixed(t *testing.T) {
	t.Parallel()
	decoys := func(t *testing.T, base *blobstore.Store) {
		t.Helper()
		ctx := context.Background()
		for _, k := range []string{"decoy", "tenant/wsx", "tenant/ws2/k", "tenant/w"} {
			if err := base.Put(ctx, k, []byte("decoy")); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("file-Sub", func(t *testing.T) {
		blobstoretest.Run(t, func(t *testing.T) *blobstore.Store {
			base := open(t, "file://"+t.TempDir(), blobstore.Options{})
			decoys(t, base)
			return base.Sub("tenant/ws")
		})
	})
	var n sync.Mutex
	seq := 0
	t.Run("mem-URL-path", func(t *testing.T) {
		blobstoretest.Run(t, func(t *testing.T) *blobstore.Store {
			n.Lock()
			seq++
			name := "prefixed" + strings.Repeat("x", seq)
			n.Unlock()
			decoys(t, open(t, "mem://"+name, blobstore.Options{}))
			s := open(t, "mem://"+name+"/tenant/ws/", blobstore.Options{})
			if got := s.URL(); got != "mem://"+name+"/tenant/ws" {
				t.Fatalf("URL() = %q", got)
			}
			return s
		})
	})
}

// TestFaulty runs the suite on a retrying Store over a driver that fails 20%
// of its calls before they happen and loses the reply of 5% of the writes
// that did happen. The retries must hide all of it.
func TestFaulty(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var drivers []*faulty.Driver
	seed := uint64(0)
	blobstoretest.Run(t, func(t *testing.T) *blobstore.Store {
		mu.Lock()
		defer mu.Unlock()
		seed++
		opts := blobstore.Options{
			// 0.2^25: a call fails for good about once in 10^17.
			Retry: blobstore.RetryPolicy{MaxAttempts: 25, BaseDelay: 100 * time.Microsecond, MaxDelay: 2 * time.Millisecond},
			WrapDriver: func(d blobstore.Driver) blobstore.Driver {
				fd := faulty.New(d, faulty.Options{FailRate: 0.2, LostReplyRate: 0.05, Seed: seed})
				drivers = append(drivers, fd)
				return fd
			},
		}
		return open(t, "file://"+t.TempDir(), opts)
	})
	var st faulty.Stats
	for _, d := range drivers {
		s := d.Stats()
		st.Calls += s.Calls
		st.Injected += s.Injected
	}
	t.Logf("fault driver: %d calls, %d injected failures", st.Calls, st.Injected)
	if st.Calls == 0 || float64(st.Injected) < 0.15*float64(st.Calls) {
		t.Errorf("fault driver injected %d failures in %d calls, want about 20%%+", st.Injected, st.Calls)
	}
}

// TestFaultyDown checks the "store is down for a while" scenario: calls
// fail as transient errors while the driver is down, and a call whose
// retries outlast the outage succeeds.
func TestFaultyDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var fd *faulty.Driver
	s := open(t, "mem://", blobstore.Options{
		Retry:      blobstore.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		WrapDriver: func(d blobstore.Driver) blobstore.Driver { fd = faulty.New(d, faulty.Options{}); return fd },
	})
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	fd.SetDown(true)
	_, err := s.Get(ctx, "k")
	if !blobstore.IsTransient(err) || !errors.Is(err, faulty.ErrDown) {
		t.Fatalf("Get while down = %v, want a transient error wrapping ErrDown", err)
	}
	if got := s.Metrics().Snapshot(blobstore.OpGet).Attempts; got != 3 {
		t.Errorf("attempts while down = %d, want 3 (MaxAttempts)", got)
	}

	patient := open(t, "mem://", blobstore.Options{
		Retry: blobstore.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
		WrapDriver: func(d blobstore.Driver) blobstore.Driver {
			fd = faulty.New(d, faulty.Options{})
			fd.SetDown(true)
			return fd
		},
	})
	go func() {
		time.Sleep(100 * time.Millisecond)
		fd.SetDown(false)
	}()
	start := time.Now()
	if err := patient.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("Put across an outage: %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("Put succeeded after %v, before the outage ended", d)
	}
	if fd.Stats().Injected == 0 {
		t.Error("no call failed during the outage")
	}
}
