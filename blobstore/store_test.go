package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
)

// scripted is a Driver over an in-memory bucket whose calls can be made to
// fail by hooks. A hook returning a non-nil error fails the call before (or,
// for afterPut, after) the bucket sees it.
type scripted struct {
	Driver
	putCalls  atomic.Int64
	statCalls atomic.Int64
	getCalls  atomic.Int64
	beforePut func(n int64, r io.Reader) error // n: 1-based call number
	afterPut  func(n int64) error
	beforeGet func(n int64) error
	stat      func(ctx context.Context) error
}

var errFlaky = errors.New("flaky network")

func newScripted() *scripted {
	return &scripted{Driver: &gocloudDriver{b: memblob.OpenBucket(nil)}}
}

func (d *scripted) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) error {
	n := d.putCalls.Add(1)
	if d.beforePut != nil {
		if err := d.beforePut(n, r); err != nil {
			return err
		}
	}
	if err := d.Driver.Put(ctx, key, r, size, opts); err != nil {
		return err
	}
	if d.afterPut != nil {
		return d.afterPut(n)
	}
	return nil
}

func (d *scripted) NewRangeReader(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	n := d.getCalls.Add(1)
	if d.beforeGet != nil {
		if err := d.beforeGet(n); err != nil {
			return nil, err
		}
	}
	return d.Driver.NewRangeReader(ctx, key, off, length)
}

func (d *scripted) Stat(ctx context.Context, key string) (Attrs, error) {
	d.statCalls.Add(1)
	if d.stat != nil {
		if err := d.stat(ctx); err != nil {
			return Attrs{}, err
		}
	}
	return d.Driver.Stat(ctx, key)
}

func (d *scripted) Classify(err error) Kind {
	if errors.Is(err, errFlaky) {
		return KindTransient
	}
	return d.Driver.Classify(err)
}

// newTestStore returns a Store over d whose backoff sleeps are recorded
// instead of slept.
func newTestStore(d Driver, attempts int) (*Store, *[]time.Duration) {
	var mu sync.Mutex
	var sleeps []time.Duration
	s := New("test://", d, Options{
		Retry: RetryPolicy{MaxAttempts: attempts, BaseDelay: 10 * time.Millisecond, MaxDelay: 40 * time.Millisecond},
		sleep: func(ctx context.Context, dur time.Duration) error {
			mu.Lock()
			sleeps = append(sleeps, dur)
			mu.Unlock()
			return ctx.Err()
		},
	})
	return s, &sleeps
}

func TestRetryBoundedAttempts(t *testing.T) {
	d := newScripted()
	d.beforePut = func(int64, io.Reader) error { return errFlaky }
	s, sleeps := newTestStore(d, 4)
	err := s.Put(context.Background(), "k", []byte("v"))
	if !IsTransient(err) || !errors.Is(err, ErrTransient) || !errors.Is(err, errFlaky) {
		t.Fatalf("Put = %v, want a transient error wrapping the driver's", err)
	}
	if got := d.putCalls.Load(); got != 4 {
		t.Errorf("driver saw %d attempts, want 4", got)
	}
	if len(*sleeps) != 3 {
		t.Fatalf("slept %d times, want 3 (between attempts)", len(*sleeps))
	}
	for i, dur := range *sleeps {
		ceiling := min(10*time.Millisecond<<i, 40*time.Millisecond)
		if dur <= 0 || dur > ceiling {
			t.Errorf("sleep %d = %v, want in (0, %v]", i, dur, ceiling)
		}
	}
	st := s.Metrics().Snapshot(OpPut)
	if st.Calls != 1 || st.Attempts != 4 || st.Errors[KindTransient] != 1 {
		t.Errorf("metrics = %+v, want 1 call, 4 attempts, 1 transient error", st)
	}
}

func TestRetryDefaultsBounded(t *testing.T) {
	d := newScripted()
	d.beforePut = func(int64, io.Reader) error { return errFlaky }
	s, _ := newTestStore(d, 0) // 0: the default
	_ = s.Put(context.Background(), "k", []byte("v"))
	if got := d.putCalls.Load(); got != 6 {
		t.Errorf("default policy made %d attempts, want 6", got)
	}
}

func TestRetryThenSuccess(t *testing.T) {
	d := newScripted()
	d.beforePut = func(n int64, _ io.Reader) error {
		if n <= 2 {
			return errFlaky
		}
		return nil
	}
	s, _ := newTestStore(d, 5)
	ctx := context.Background()
	if err := s.Put(ctx, "k", []byte("value")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || string(got) != "value" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if st := s.Metrics().Snapshot(OpPut); st.Calls != 1 || st.Attempts != 3 || len(st.Errors) != 0 || st.Bytes != 5 {
		t.Errorf("metrics = %+v", st)
	}
}

func TestNoRetryOfPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		kind Kind
	}{
		{"unknown", errors.New("something odd"), KindUnknown},
		{"canceled", context.Canceled, KindCanceled},
	} {
		d := newScripted()
		d.stat = func(context.Context) error { return tc.err }
		s, sleeps := newTestStore(d, 5)
		_, err := s.Stat(context.Background(), "k")
		if KindOf(err) != tc.kind {
			t.Errorf("%s: kind %v, want %v", tc.name, KindOf(err), tc.kind)
		}
		if d.statCalls.Load() != 1 || len(*sleeps) != 0 {
			t.Errorf("%s: %d attempts, %d sleeps; want 1 and 0", tc.name, d.statCalls.Load(), len(*sleeps))
		}
	}
	// Not found is an answer, not a failure to retry.
	d := newScripted()
	s, _ := newTestStore(d, 5)
	if _, err := s.Stat(context.Background(), "missing"); !errors.Is(err, ErrNotFound) || d.statCalls.Load() != 1 {
		t.Errorf("Stat(missing) = %v after %d attempts", err, d.statCalls.Load())
	}
}

func TestBackoffJitter(t *testing.T) {
	s := New("test://", newScripted(), Options{Retry: RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 100 * time.Millisecond}})
	for attempt := range 12 {
		ceiling := min(time.Millisecond<<attempt, 100*time.Millisecond)
		seen := map[time.Duration]bool{}
		for range 200 {
			d := s.backoff(attempt)
			if d <= 0 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want in (0, %v]", attempt, d, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("backoff(%d) took only %d distinct values in 200 draws: no jitter", attempt, len(seen))
		}
	}
	// Huge attempt numbers do not overflow into a zero or negative delay.
	if d := s.backoff(1000); d <= 0 || d > 100*time.Millisecond {
		t.Errorf("backoff(1000) = %v", d)
	}
}

// onlyReader hides the Seek method of its reader.
type onlyReader struct{ io.Reader }

func TestNonSeekablePutNotRetried(t *testing.T) {
	d := newScripted()
	d.beforePut = func(_ int64, r io.Reader) error {
		_, _ = io.CopyN(io.Discard, r, 3) // consume part of the stream
		return errFlaky
	}
	s, sleeps := newTestStore(d, 5)
	err := s.PutReader(context.Background(), "k", onlyReader{strings.NewReader("streamed data")}, -1)
	if !IsTransient(err) || !errors.Is(err, errFlaky) {
		t.Fatalf("PutReader = %v, want the first (transient) error", err)
	}
	if d.putCalls.Load() != 1 || len(*sleeps) != 0 {
		t.Errorf("a non-seekable put was attempted %d times (%d sleeps), want once", d.putCalls.Load(), len(*sleeps))
	}
}

func TestSeekablePutRewoundOnRetry(t *testing.T) {
	d := newScripted()
	d.beforePut = func(n int64, r io.Reader) error {
		if n == 1 {
			_, _ = io.CopyN(io.Discard, r, 4)
			return errFlaky
		}
		return nil
	}
	s, _ := newTestStore(d, 3)
	ctx := context.Background()
	// A reader positioned after a header: the retry rewinds to there.
	r := strings.NewReader("HDR:payload")
	if _, err := r.Seek(4, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := s.PutReader(ctx, "k", r, 7); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || string(got) != "payload" {
		t.Fatalf("after a retried put: %q, %v; want payload", got, err)
	}
}

func TestPutIfAbsentLostReply(t *testing.T) {
	// The first attempt writes the object but its reply is lost; the retry
	// finds our own bytes there and reports success.
	d := newScripted()
	d.afterPut = func(n int64) error {
		if n == 1 {
			return errFlaky
		}
		return nil
	}
	s, _ := newTestStore(d, 3)
	if err := s.PutIfAbsent(context.Background(), "k", []byte("mine")); err != nil {
		t.Fatalf("PutIfAbsent after a lost reply = %v, want nil", err)
	}
	if d.putCalls.Load() != 2 {
		t.Errorf("%d attempts, want 2", d.putCalls.Load())
	}
}

func TestPutIfAbsentLostToOtherWriter(t *testing.T) {
	// The first attempt fails transiently without writing; meanwhile
	// another writer creates the key with other bytes: ErrExists.
	d := newScripted()
	s, _ := newTestStore(d, 3)
	ctx := context.Background()
	d.beforePut = func(n int64, _ io.Reader) error {
		if n == 1 {
			d.beforePut = nil
			if err := d.Driver.Put(ctx, "k", strings.NewReader("theirs"), 6, PutOptions{IfAbsent: true}); err != nil {
				t.Error(err)
			}
			return errFlaky
		}
		return nil
	}
	if err := s.PutIfAbsent(ctx, "k", []byte("mine")); !errors.Is(err, ErrExists) {
		t.Fatalf("PutIfAbsent = %v, want ErrExists", err)
	}
}

func TestPutIfAbsentSameBytesWithoutFailure(t *testing.T) {
	// No attempt of this call failed, so identical bytes already stored
	// were written by someone else: ErrExists.
	d := newScripted()
	s, _ := newTestStore(d, 3)
	ctx := context.Background()
	if err := s.PutIfAbsent(ctx, "k", []byte("same")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "k", []byte("same")); !errors.Is(err, ErrExists) {
		t.Fatalf("second PutIfAbsent = %v, want ErrExists", err)
	}
}

func TestPutIfAbsentComparisonRetried(t *testing.T) {
	// After a lost reply, reading the stored bytes back fails once: the
	// question is asked again instead of answering ErrExists.
	d := newScripted()
	d.afterPut = func(n int64) error {
		if n == 1 {
			return errFlaky
		}
		return nil
	}
	d.beforeGet = func(n int64) error {
		if n == 1 {
			return errFlaky
		}
		return nil
	}
	s, _ := newTestStore(d, 5)
	if err := s.PutIfAbsent(context.Background(), "k", []byte("mine")); err != nil {
		t.Fatalf("PutIfAbsent = %v, want nil", err)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	d := newScripted()
	d.beforePut = func(int64, io.Reader) error { return errFlaky }
	s := New("test://", d, Options{Retry: RetryPolicy{MaxAttempts: 100, BaseDelay: time.Hour, MaxDelay: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	err := s.Put(ctx, "k", []byte("v"))
	if !errors.Is(err, context.Canceled) || KindOf(err) != KindCanceled {
		t.Fatalf("Put = %v, want a canceled error", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("cancel during backoff took %v", time.Since(start))
	}
}

func TestCancelMatchesContextWhateverTheDriverSays(t *testing.T) {
	// Providers often report a cancelled request as a transport error;
	// Store still reports the cancellation, and does not retry.
	d := newScripted()
	ctx, cancel := context.WithCancel(context.Background())
	d.stat = func(context.Context) error { cancel(); return errFlaky }
	s, sleeps := newTestStore(d, 5)
	_, err := s.Stat(ctx, "k")
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errFlaky) || KindOf(err) != KindCanceled {
		t.Fatalf("Stat = %v (kind %v), want canceled wrapping the driver's error", err, KindOf(err))
	}
	if len(*sleeps) != 0 {
		t.Errorf("a cancelled call was retried")
	}
}

func TestConcurrencyLimit(t *testing.T) {
	const limit = 3
	d := newScripted()
	var inFlight, peak atomic.Int64
	release := make(chan struct{})
	d.stat = func(ctx context.Context) error {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
	s := New("test://", d, Options{MaxConcurrency: limit})
	ctx := context.Background()
	if err := s.Put(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { _, _ = s.Stat(ctx, "k") })
	}
	deadline := time.Now().Add(10 * time.Second)
	for inFlight.Load() < limit && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // give any excess caller time to get in
	if got := inFlight.Load(); got != limit {
		t.Errorf("%d calls in flight, want exactly %d", got, limit)
	}
	close(release)
	wg.Wait()
	if peak.Load() != limit {
		t.Errorf("peak in flight %d, want %d", peak.Load(), limit)
	}
}

func TestOpenReaderHoldsSlot(t *testing.T) {
	s := New("test://", newScripted(), Options{MaxConcurrency: 1})
	ctx := context.Background()
	if err := s.Put(ctx, "k", []byte("data")); err != nil {
		t.Fatal(err)
	}
	r, err := s.NewRangeReader(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := s.Stat(short, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stat while the only slot is held by a reader = %v, want to wait until the deadline", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil { // twice is harmless
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "k"); err != nil {
		t.Errorf("Stat after the reader closed: %v", err)
	}
}

func TestErrorMatching(t *testing.T) {
	e := &Error{Op: "get", URL: "s3://b/p", Key: "k", Kind: KindNotFound, Err: errors.New("NoSuchKey")}
	if !errors.Is(e, ErrNotFound) || errors.Is(e, ErrExists) || errors.Is(e, ErrTransient) {
		t.Error("KindNotFound matches the wrong sentinels")
	}
	wrapped := fmt.Errorf("reading chunk: %w", e)
	if !errors.Is(wrapped, ErrNotFound) || KindOf(wrapped) != KindNotFound {
		t.Error("a wrapped *Error lost its kind")
	}
	if msg := e.Error(); !strings.Contains(msg, "s3://b/p") || !strings.Contains(msg, `"k"`) || !strings.Contains(msg, "get") {
		t.Errorf("message %q does not name op, URL and key", msg)
	}
	if KindOf(context.Canceled) != KindCanceled || KindOf(fmt.Errorf("x: %w", context.DeadlineExceeded)) != KindCanceled {
		t.Error("context errors are not KindCanceled")
	}
	if KindOf(errors.New("plain")) != KindUnknown || IsTransient(errors.New("plain")) {
		t.Error("a plain error has a kind")
	}
	for k := KindUnknown; k <= lastKind; k++ {
		if k.String() == "" || (k != KindUnknown && k.String() == "unknown") {
			t.Errorf("Kind(%d) has no name", k)
		}
	}
}

func TestValidateKey(t *testing.T) {
	for _, k := range []string{"a", "a/b", "a b/ü", "...", "a..b", ".hidden/x", strings.Repeat("x", 1024)} {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "x\x00", "\xff", strings.Repeat("x", 1025)} {
		if err := ValidateKey(k); err == nil {
			t.Errorf("ValidateKey(%q) = nil, want an error", k)
		}
	}
}

func TestGetRangeZeroLengthChecksExistence(t *testing.T) {
	s := New("test://", newScripted(), Options{})
	ctx := context.Background()
	if _, err := s.GetRange(ctx, "nope", 0, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRange(missing, 0, 0) = %v", err)
	}
	if err := s.Put(ctx, "k", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	b, err := s.GetRange(ctx, "k", 1, 0)
	if err != nil || b == nil || len(b) != 0 {
		t.Errorf("GetRange(k, 1, 0) = %v, %v; want an empty, non-nil slice", b, err)
	}
	if !bytes.Equal(must(s.GetRange(ctx, "k", 1, 1)), []byte("b")) {
		t.Error("GetRange(k, 1, 1) != b")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestKeyLengthIncludesPrefix(t *testing.T) {
	s := New("test://", newScripted(), Options{}).Sub("some/prefix")
	ctx := context.Background()
	long := strings.Repeat("x", 1024-len("some/prefix/"))
	if err := s.Put(ctx, long, []byte("v")); err != nil {
		t.Fatalf("Put of a full key of exactly 1024 bytes: %v", err)
	}
	err := s.Put(ctx, long+"x", []byte("v"))
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindPermanent {
		t.Fatalf("Put of a 1025-byte full key = %v, want a permanent error", err)
	}
}
