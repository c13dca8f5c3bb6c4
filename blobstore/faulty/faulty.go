// Package faulty wraps a blobstore.Driver so that it fails on purpose: each
// call fails with a given probability, a "down" switch fails every call, and
// a fixed latency can be added. It lets the layers above blobstore test what
// they do when the store is slow, flaky or gone ("the store fails 20% of
// requests, then is down for a while"), or refuses writes with an error of
// the test's choosing (SetPutError: a full disk).
//
// Injected failures are classified as transient, so a Store built over a
// faulty Driver retries them like real network errors. The failures are
// decided by a pseudo-random generator seeded by Options.Seed: a test that
// issues its calls from one goroutine sees the same failures on every run.
//
// Build a Store over it with blobstore.New, or through blobstore.Open with
// Options.WrapDriver:
//
//	fd := faulty.New(drv, faulty.Options{FailRate: 0.2, Seed: 1})
//	s := blobstore.New("mem://", fd, blobstore.Options{})
//	fd.SetDown(true) // every call fails until SetDown(false)
//
// This package only wraps; it must never import any other agentfs package
// than blobstore.
package faulty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

// ErrInjected is the error of a call that failed by chance (Options.FailRate,
// LostReplyRate, ReadFailRate). Classify maps it to blobstore.KindTransient.
var ErrInjected = errors.New("faulty: injected transient failure")

// ErrDown is the error of every call made while the driver is down
// (SetDown). Classify maps it to blobstore.KindTransient.
var ErrDown = errors.New("faulty: store is down")

// Options configure a faulty Driver. The zero value injects nothing.
type Options struct {
	// FailRate is the probability, in [0, 1], that a call fails with
	// ErrInjected before it reaches the wrapped driver (so it has no effect).
	FailRate float64
	// LostReplyRate is the probability, in [0, 1], that a call of Put or
	// Delete that succeeded at the wrapped driver reports ErrInjected anyway:
	// the write happened but its reply was lost. It exercises the callers'
	// handling of ambiguous failures (e.g. PutIfAbsent's retry).
	LostReplyRate float64
	// ReadFailRate is the probability, in [0, 1], that one Read of a reader
	// returned by NewRangeReader fails with ErrInjected (a connection lost
	// mid-stream). Store does not retry those: leave it 0 unless that is
	// what the test is about.
	ReadFailRate float64
	// Latency is added before every call (and honours the call's context).
	Latency time.Duration
	// Seed seeds the generator that decides the failures.
	Seed uint64
}

// Stats counts what a Driver did.
type Stats struct {
	Calls    int64 // calls of the Driver methods (Classify and Close excluded)
	Injected int64 // calls and reads that failed with ErrInjected, ErrDown or SetPutError's error
}

// Driver is a blobstore.Driver that injects failures into the calls it
// passes to the wrapped driver. It is safe for concurrent use; SetDown and
// SetFailRate may be called at any time from any goroutine.
type Driver struct {
	inner blobstore.Driver
	opts  Options

	down     atomic.Bool
	putErr   atomic.Pointer[error] // SetPutError's error; nil: none
	failRate atomic.Uint64         // math.Float64bits of the current FailRate
	calls    atomic.Int64
	injected atomic.Int64

	mu  sync.Mutex
	rng *rand.Rand // guarded by mu
}

var _ blobstore.Driver = (*Driver)(nil)

// New returns a Driver that wraps inner. Closing it closes inner.
func New(inner blobstore.Driver, opts Options) *Driver {
	d := &Driver{inner: inner, opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
	d.SetFailRate(opts.FailRate)
	return d
}

// SetDown switches the driver down (every call fails with ErrDown, without
// reaching the wrapped driver) or back up.
func (d *Driver) SetDown(down bool) { d.down.Store(down) }

// SetPutError makes every Put fail with err, without reaching the wrapped
// driver, until SetPutError(nil): a store that refuses writes and still
// serves reads (a full disk, a quota reached, a read-only filesystem).
// Unlike the injected failures, err is classified by the wrapped driver,
// as one of its own errors would be (a file:// driver's syscall.ENOSPC,
// say).
func (d *Driver) SetPutError(err error) {
	if err == nil {
		d.putErr.Store(nil)
		return
	}
	d.putErr.Store(&err)
}

// Down reports whether the driver is down.
func (d *Driver) Down() bool { return d.down.Load() }

// SetFailRate changes Options.FailRate for the calls that start afterwards.
func (d *Driver) SetFailRate(p float64) { d.failRate.Store(floatBits(p)) }

// Stats returns the counters so far.
func (d *Driver) Stats() Stats {
	return Stats{Calls: d.calls.Load(), Injected: d.injected.Load()}
}

// Unwrap returns the wrapped driver.
func (d *Driver) Unwrap() blobstore.Driver { return d.inner }

func (d *Driver) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rng.Float64() < p
}

// before runs ahead of every call: latency, the down switch, FailRate.
func (d *Driver) before(ctx context.Context, op string) error {
	d.calls.Add(1)
	if d.opts.Latency > 0 {
		t := time.NewTimer(d.opts.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	if d.down.Load() {
		d.injected.Add(1)
		return fmt.Errorf("%s: %w", op, ErrDown)
	}
	if d.chance(bitsFloat(d.failRate.Load())) {
		d.injected.Add(1)
		return fmt.Errorf("%s: %w", op, ErrInjected)
	}
	return nil
}

// after turns a success of a write into a lost reply, by chance.
func (d *Driver) after(op string, err error) error {
	if err == nil && d.chance(d.opts.LostReplyRate) {
		d.injected.Add(1)
		return fmt.Errorf("%s (reply lost after the write happened): %w", op, ErrInjected)
	}
	return err
}

// NewRangeReader implements blobstore.Driver.
func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := d.before(ctx, "get"); err != nil {
		return nil, err
	}
	r, err := d.inner.NewRangeReader(ctx, key, offset, length)
	if err != nil || d.opts.ReadFailRate <= 0 {
		return r, err
	}
	return &reader{d: d, r: r}, nil
}

// Put implements blobstore.Driver.
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blobstore.PutOptions) error {
	if err := d.before(ctx, "put"); err != nil {
		return err
	}
	if e := d.putErr.Load(); e != nil {
		d.injected.Add(1)
		return fmt.Errorf("put: %w", *e)
	}
	return d.after("put", d.inner.Put(ctx, key, r, size, opts))
}

// Stat implements blobstore.Driver.
func (d *Driver) Stat(ctx context.Context, key string) (blobstore.Attrs, error) {
	if err := d.before(ctx, "stat"); err != nil {
		return blobstore.Attrs{}, err
	}
	return d.inner.Stat(ctx, key)
}

// List implements blobstore.Driver.
func (d *Driver) List(ctx context.Context, prefix, token string, pageSize int) (blobstore.ListPage, error) {
	if err := d.before(ctx, "list"); err != nil {
		return blobstore.ListPage{}, err
	}
	return d.inner.List(ctx, prefix, token, pageSize)
}

// Delete implements blobstore.Driver.
func (d *Driver) Delete(ctx context.Context, key string) error {
	if err := d.before(ctx, "delete"); err != nil {
		return err
	}
	return d.after("delete", d.inner.Delete(ctx, key))
}

// Classify maps ErrInjected and ErrDown to blobstore.KindTransient and
// defers every other error (SetPutError's too) to the wrapped driver.
func (d *Driver) Classify(err error) blobstore.Kind {
	if errors.Is(err, ErrInjected) || errors.Is(err, ErrDown) {
		return blobstore.KindTransient
	}
	return d.inner.Classify(err)
}

// Close closes the wrapped driver.
func (d *Driver) Close() error { return d.inner.Close() }

type reader struct {
	d *Driver
	r io.ReadCloser
}

func (r *reader) Read(p []byte) (int, error) {
	if r.d.chance(r.d.opts.ReadFailRate) {
		r.d.injected.Add(1)
		return 0, fmt.Errorf("read: %w", ErrInjected)
	}
	return r.r.Read(p)
}

func (r *reader) Close() error { return r.r.Close() }

func floatBits(f float64) uint64 { return math.Float64bits(f) }
func bitsFloat(b uint64) float64 { return math.Float64frombits(b) }
