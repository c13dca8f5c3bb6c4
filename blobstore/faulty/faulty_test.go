package faulty_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/blobstore/faulty"
)

func memDriver(t *testing.T) blobstore.Driver {
	t.Helper()
	d, _, err := blobstore.OpenDriver(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// outcomes records which of n Stat calls failed by injection.
func outcomes(t *testing.T, d *faulty.Driver, n int) []bool {
	t.Helper()
	var out []bool
	for range n {
		_, err := d.Stat(context.Background(), "k")
		out = append(out, errors.Is(err, faulty.ErrInjected))
	}
	return out
}

func TestDeterministicBySeed(t *testing.T) {
	a := outcomes(t, faulty.New(memDriver(t), faulty.Options{FailRate: 0.3, Seed: 7}), 200)
	b := outcomes(t, faulty.New(memDriver(t), faulty.Options{FailRate: 0.3, Seed: 7}), 200)
	c := outcomes(t, faulty.New(memDriver(t), faulty.Options{FailRate: 0.3, Seed: 8}), 200)
	same := func(x, y []bool) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Error("the same seed gave different failures")
	}
	if same(a, c) {
		t.Error("different seeds gave the same 200 outcomes")
	}
}

func TestFailRate(t *testing.T) {
	for _, p := range []float64{0, 0.2, 1} {
		d := faulty.New(memDriver(t), faulty.Options{FailRate: p, Seed: 1})
		failed := 0
		const n = 5000
		for _, f := range outcomes(t, d, n) {
			if f {
				failed++
			}
		}
		got := float64(failed) / n
		if got < p-0.03 || got > p+0.03 {
			t.Errorf("FailRate %v: %v of calls failed", p, got)
		}
		if st := d.Stats(); st.Calls != n || st.Injected != int64(failed) {
			t.Errorf("FailRate %v: stats %+v, want %d calls and %d injected", p, st, n, failed)
		}
	}
}

func TestInjectedFailureHasNoEffect(t *testing.T) {
	inner := memDriver(t)
	d := faulty.New(inner, faulty.Options{FailRate: 1})
	ctx := context.Background()
	err := d.Put(ctx, "k", strings.NewReader("v"), 1, blobstore.PutOptions{})
	if !errors.Is(err, faulty.ErrInjected) {
		t.Fatalf("Put = %v", err)
	}
	if _, err := inner.Stat(ctx, "k"); inner.Classify(err) != blobstore.KindNotFound {
		t.Errorf("a failed-before Put wrote the object: %v", err)
	}
}

func TestLostReply(t *testing.T) {
	inner := memDriver(t)
	d := faulty.New(inner, faulty.Options{LostReplyRate: 1})
	ctx := context.Background()
	err := d.Put(ctx, "k", strings.NewReader("v"), 1, blobstore.PutOptions{})
	if !errors.Is(err, faulty.ErrInjected) || d.Classify(err) != blobstore.KindTransient {
		t.Fatalf("Put = %v, want a transient injected error", err)
	}
	if _, err := inner.Stat(ctx, "k"); err != nil {
		t.Errorf("the write whose reply was lost did not happen: %v", err)
	}
	// Reads are not affected by LostReplyRate.
	if _, err := d.Stat(ctx, "k"); err != nil {
		t.Errorf("Stat = %v", err)
	}
}

func TestDownAndUp(t *testing.T) {
	d := faulty.New(memDriver(t), faulty.Options{})
	ctx := context.Background()
	if err := d.Put(ctx, "k", strings.NewReader("v"), 1, blobstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	d.SetDown(true)
	if !d.Down() {
		t.Error("Down() = false after SetDown(true)")
	}
	for _, err := range []error{
		func() error { _, err := d.Stat(ctx, "k"); return err }(),
		func() error { _, err := d.NewRangeReader(ctx, "k", 0, -1); return err }(),
		func() error { _, err := d.List(ctx, "", "", 10); return err }(),
		d.Delete(ctx, "k"),
		d.Put(ctx, "k2", strings.NewReader("v"), 1, blobstore.PutOptions{}),
	} {
		if !errors.Is(err, faulty.ErrDown) || d.Classify(err) != blobstore.KindTransient {
			t.Errorf("call while down = %v, want transient ErrDown", err)
		}
	}
	d.SetDown(false)
	if _, err := d.Stat(ctx, "k"); err != nil {
		t.Errorf("Stat after coming back up = %v (and the Delete while down must not have happened)", err)
	}
}

func TestClassifyDelegates(t *testing.T) {
	d := faulty.New(memDriver(t), faulty.Options{})
	_, err := d.Stat(context.Background(), "missing")
	if d.Classify(err) != blobstore.KindNotFound {
		t.Errorf("Classify(not found from the wrapped driver) = %v", d.Classify(err))
	}
	if d.Classify(errors.New("odd")) != blobstore.KindUnknown {
		t.Error("Classify(plain error) != unknown")
	}
}

func TestLatencyHonoursContext(t *testing.T) {
	d := faulty.New(memDriver(t), faulty.Options{Latency: 30 * time.Millisecond})
	start := time.Now()
	_, _ = d.Stat(context.Background(), "k")
	if time.Since(start) < 30*time.Millisecond {
		t.Errorf("call took %v, want at least the 30ms latency", time.Since(start))
	}
	slow := faulty.New(memDriver(t), faulty.Options{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := slow.Stat(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stat with an hour of latency and a 20ms deadline = %v", err)
	}
}

func TestReadFailRate(t *testing.T) {
	inner := memDriver(t)
	ctx := context.Background()
	if err := inner.Put(ctx, "k", strings.NewReader("0123456789"), 10, blobstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	d := faulty.New(inner, faulty.Options{ReadFailRate: 1})
	r, err := d.NewRangeReader(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := io.ReadAll(r); !errors.Is(err, faulty.ErrInjected) {
		t.Errorf("read = %v, want ErrInjected mid-stream", err)
	}
}

func TestStoreRetriesHideFaults(t *testing.T) {
	ctx := context.Background()
	var fd *faulty.Driver
	s, err := blobstore.Open(ctx, "mem://", blobstore.Options{
		Retry: blobstore.RetryPolicy{MaxAttempts: 30, BaseDelay: time.Microsecond, MaxDelay: time.Microsecond},
		WrapDriver: func(d blobstore.Driver) blobstore.Driver {
			fd = faulty.New(d, faulty.Options{FailRate: 0.5, Seed: 3})
			return fd
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	for range 100 {
		if err := s.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if fd.Stats().Injected == 0 {
		t.Fatal("nothing was injected")
	}
	if st := s.Metrics().Snapshot(blobstore.OpPut); st.Attempts <= st.Calls {
		t.Errorf("put metrics %+v show no retries", st)
	}
}
