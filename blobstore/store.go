package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"
)

// RetryPolicy bounds the retries of transient errors. Delays grow
// exponentially from BaseDelay, capped at MaxDelay, with full jitter.
type RetryPolicy struct {
	// MaxAttempts is the total number of attempts, including the first.
	// 0 means the default (6); 1 disables retries.
	MaxAttempts int
	// BaseDelay is the ceiling of the first backoff (attempt 2 waits up to
	// BaseDelay, attempt 3 up to 2*BaseDelay, ...). 0 means 50ms.
	BaseDelay time.Duration
	// MaxDelay caps every backoff. 0 means 5s.
	MaxDelay time.Duration
}

// Options configure a Store. The zero value gives the defaults.
type Options struct {
	Retry RetryPolicy
	// MaxConcurrency caps the driver calls in flight (an open reader holds
	// its slot until closed). 0 means 32.
	MaxConcurrency int
	// Metrics receives the counters; nil means a new, private Metrics.
	Metrics *Metrics
	// Create lets Open create the store where the URL names something
	// missing that the driver can create: the directory of a file:// URL
	// (and its parents). Only creating a volume sets it (`agentfs init`,
	// the embedded default store's first use). Without it a missing
	// file:// directory is an error, and no Store call ever creates one:
	// writes to a store directory that disappeared (moved, deleted, an
	// unmounted filesystem) fail instead of recreating it. Other drivers
	// ignore it (buckets are never created).
	Create bool
	// WrapDriver, when set, is applied by Open to the driver it builds
	// before the Store is assembled around it: the retries, limit and
	// metrics of the Store then see the wrapped driver. Tests use it to
	// inject faults (see package blobstore/faulty). New ignores it.
	WrapDriver func(Driver) Driver
	// sleep waits between retries; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// Store is the blob store every agentfs layer uses. It is safe for concurrent
// use. Keys are '/'-separated UTF-8 strings relative to the store; a Store
// created by Sub sees only the keys under its prefix.
type Store struct {
	url    string // display URL, no credentials
	drv    Driver
	prefix string // applied to every key; "" or ends with '/'
	retry  RetryPolicy
	sem    chan struct{}
	m      *Metrics
	sleep  func(ctx context.Context, d time.Duration) error
	owner  bool // Close closes drv
}

// New returns a Store over drv. url is used in error messages and must not
// contain credentials.
func New(url string, drv Driver, opts Options) *Store {
	r := opts.Retry
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 6
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = 50 * time.Millisecond
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = 5 * time.Second
	}
	n := opts.MaxConcurrency
	if n <= 0 {
		n = 32
	}
	m := opts.Metrics
	if m == nil {
		m = NewMetrics()
	}
	sl := opts.sleep
	if sl == nil {
		sl = sleepCtx
	}
	return &Store{url: url, drv: drv, retry: r, sem: make(chan struct{}, n), m: m, sleep: sl, owner: true}
}

// Sub returns a Store that sees only the keys under prefix (a trailing '/' is
// added if missing). It shares the driver, limit and metrics with s; closing
// it does not close s.
func (s *Store) Sub(prefix string) *Store {
	prefix = strings.Trim(prefix, "/")
	c := *s
	c.owner = false
	if prefix != "" {
		c.prefix = s.prefix + prefix + "/"
		c.url = strings.TrimSuffix(s.url, "/") + "/" + prefix
	}
	return &c
}

// URL returns the store's URL (credentials removed).
func (s *Store) URL() string { return s.url }

// Metrics returns the counters this store updates.
func (s *Store) Metrics() *Metrics { return s.m }

// Close releases the driver (only for the Store returned by New or Open).
func (s *Store) Close() error {
	if !s.owner {
		return nil
	}
	return s.drv.Close()
}

// maxKeyLen is the longest full key (prefix included) every provider takes.
const maxKeyLen = 1024

// ValidateKey reports whether key is acceptable to every driver: non-empty,
// valid UTF-8, at most 1024 bytes, no NUL, no leading or trailing '/', no
// empty, "." or ".." segments.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case len(key) > maxKeyLen:
		return fmt.Errorf("key longer than %d bytes", maxKeyLen)
	case !utf8.ValidString(key):
		return errors.New("key is not valid UTF-8")
	case strings.ContainsRune(key, 0):
		return errors.New("key contains NUL")
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("key %q has an empty, '.' or '..' segment", key)
		}
	}
	return nil
}

func (s *Store) fail(op, key string, kind Kind, err error) error {
	return &Error{Op: op, URL: s.url, Key: key, Kind: kind, Err: err}
}

// wrap classifies a driver error. When ctx is done the error is a
// KindCanceled error that matches ctx.Err() with errors.Is, whatever the
// provider made of the cancellation (a closed connection, a reset stream).
func (s *Store) wrap(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		if !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return s.fail(op, key, KindCanceled, err)
	}
	kind := s.drv.Classify(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		kind = KindCanceled
	}
	return s.fail(op, key, kind, err)
}

func (s *Store) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) release() { <-s.sem }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) backoff(attempt int) time.Duration {
	d := s.retry.BaseDelay << min(attempt, 20)
	if d <= 0 || d > s.retry.MaxDelay {
		d = s.retry.MaxDelay
	}
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

// do runs fn with the concurrency limit, retrying transient errors. fn
// returns the number of payload bytes moved and a wrapped error. The
// retried flag passed to fn is true on every attempt after the first.
func (s *Store) do(ctx context.Context, op Op, opName, key string, fn func(ctx context.Context, retried bool) (int64, error)) error {
	return s.doN(ctx, op, opName, key, s.retry.MaxAttempts, fn)
}

// doN is do with an explicit bound on the attempts.
func (s *Store) doN(ctx context.Context, op Op, opName, key string, maxAttempts int, fn func(ctx context.Context, retried bool) (int64, error)) error {
	start := time.Now()
	var n int64
	var err error
	for attempt := 0; ; attempt++ {
		if cerr := ctx.Err(); cerr != nil {
			err = s.fail(opName, key, KindCanceled, cerr)
			break
		}
		if aerr := s.acquire(ctx); aerr != nil {
			err = s.fail(opName, key, KindCanceled, aerr)
			break
		}
		s.m.attempt(op)
		n, err = fn(ctx, attempt > 0)
		s.release()
		if err == nil || KindOf(err) != KindTransient || attempt+1 >= maxAttempts {
			break
		}
		if serr := s.sleep(ctx, s.backoff(attempt)); serr != nil {
			err = s.fail(opName, key, KindCanceled, serr)
			break
		}
	}
	s.m.observe(op, time.Since(start), n, err)
	return err
}

// check validates key, and the full key (with the Store's prefix) against
// the providers' 1024-byte limit.
func (s *Store) check(op, key string) error {
	if err := ValidateKey(key); err != nil {
		return s.fail(op, key, KindPermanent, err)
	}
	if n := len(s.prefix) + len(key); n > maxKeyLen {
		return s.fail(op, key, KindPermanent, fmt.Errorf("key with the store's prefix %q is %d bytes, more than %d", s.prefix, n, maxKeyLen))
	}
	return nil
}

// Get returns the whole object at key.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	return s.GetRange(ctx, key, 0, -1)
}

// GetRange returns length bytes of key starting at offset (length < 0: to
// the end). A range that extends past the end returns the bytes that exist;
// an offset at or past the end returns an empty slice.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := s.check("get", key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, s.fail("get", key, KindPermanent, fmt.Errorf("negative offset %d", offset))
	}
	var out []byte
	err := s.do(ctx, OpGet, "get", key, func(ctx context.Context, _ bool) (int64, error) {
		if length == 0 {
			// Still check that the object exists.
			if _, err := s.drv.Stat(ctx, s.prefix+key); err != nil {
				return 0, s.wrap(ctx, "get", key, err)
			}
			out = []byte{}
			return 0, nil
		}
		r, err := s.drv.NewRangeReader(ctx, s.prefix+key, offset, length)
		if err != nil {
			return 0, s.wrap(ctx, "get", key, err)
		}
		defer r.Close()
		var buf bytes.Buffer
		if length > 0 && length < 64<<20 {
			buf.Grow(int(length))
		}
		nr, err := buf.ReadFrom(&countingReader{ctx: ctx, r: r})
		if err != nil {
			return nr, s.wrap(ctx, "get", key, err)
		}
		out = buf.Bytes()
		return nr, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NewRangeReader opens key for streaming length bytes from offset (length <
// 0: to the end). Opening is retried; errors while reading are returned by
// Read, wrapped and classified, and not retried. The reader holds one
// concurrency slot until Close.
func (s *Store) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := s.check("get", key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, s.fail("get", key, KindPermanent, fmt.Errorf("negative offset %d", offset))
	}
	var rc io.ReadCloser
	err := s.do(ctx, OpGet, "get", key, func(ctx context.Context, _ bool) (int64, error) {
		r, err := s.drv.NewRangeReader(ctx, s.prefix+key, offset, length)
		if err != nil {
			return 0, s.wrap(ctx, "get", key, err)
		}
		rc = r
		return 0, nil
	})
	if err != nil {
		return nil, err
	}
	// The slot was released by do; take one for the reader's lifetime.
	if err := s.acquire(ctx); err != nil {
		rc.Close()
		return nil, s.fail("get", key, KindCanceled, err)
	}
	return &storeReader{s: s, ctx: ctx, key: key, r: rc}, nil
}

type storeReader struct {
	s      *Store
	ctx    context.Context
	key    string
	r      io.ReadCloser
	n      int64
	closed bool
}

func (r *storeReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, r.s.fail("get", r.key, KindCanceled, err)
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.s.wrap(r.ctx, "get", r.key, err)
	}
	return n, err
}

func (r *storeReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.s.release()
	r.s.m.ops[OpGet].bytes.Add(r.n)
	return r.r.Close()
}

// Put stores data under key, replacing any existing object.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	return s.PutReader(ctx, key, bytes.NewReader(data), int64(len(data)))
}

// PutReader stores the bytes of r under key, replacing any existing object.
// size is the exact length or -1 if unknown; large objects are streamed
// (multipart where the provider has it). Transient failures are retried only
// when r is an io.Seeker (it is rewound); otherwise the first error is
// returned.
func (s *Store) PutReader(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.put(ctx, OpPut, "put", key, r, size, false)
}

// PutIfAbsent stores data under key only if key holds no object. Exactly one
// of several concurrent callers (on any machine) succeeds; the others get an
// error matching ErrExists. If an attempt fails transiently and its retry
// finds the key taken by an object whose bytes equal data, the earlier
// attempt is taken to have succeeded and PutIfAbsent returns nil.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := s.put(ctx, OpPutIfAbsent, "put-if-absent", key, bytes.NewReader(data), int64(len(data)), true)
	return err
}

func (s *Store) put(ctx context.Context, op Op, opName, key string, r io.Reader, size int64, ifAbsent bool) error {
	if err := s.check(opName, key); err != nil {
		return err
	}
	seeker, canRewind := r.(io.ReadSeeker)
	var start int64
	if canRewind {
		p, err := seeker.Seek(0, io.SeekCurrent)
		if err != nil {
			canRewind = false
		}
		start = p
	}
	attempts := s.retry.MaxAttempts
	if !canRewind {
		// The bytes already sent cannot be sent again: the first error,
		// transient or not, is the answer.
		attempts = 1
	}
	// prevTransient is true when the previous attempt failed transiently:
	// it may have written the object without our hearing of it.
	var prevTransient bool
	return s.doN(ctx, op, opName, key, attempts, func(ctx context.Context, retried bool) (int64, error) {
		if retried {
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return 0, s.fail(opName, key, KindPermanent, fmt.Errorf("rewind for retry: %w", err))
			}
		}
		cr := &countingReader{ctx: ctx, r: r}
		err := s.drv.Put(ctx, s.prefix+key, cr, size, PutOptions{IfAbsent: ifAbsent})
		if err == nil {
			return cr.n, nil
		}
		werr := s.wrap(ctx, opName, key, err)
		if ifAbsent && prevTransient && KindOf(werr) == KindExists {
			// Did our earlier attempt win? Compare the stored bytes with
			// ours. A failure to read them is itself retried, so the
			// question is asked again rather than answered wrongly.
			same, cerr := s.sameContent(ctx, key, seeker, start)
			if cerr != nil {
				return cr.n, s.wrap(ctx, opName, key, cerr)
			}
			if same {
				return cr.n, nil
			}
		}
		prevTransient = KindOf(werr) == KindTransient
		return cr.n, werr
	})
}

// sameContent reports whether the object at key holds exactly the bytes of
// rs from start to its end.
func (s *Store) sameContent(ctx context.Context, key string, rs io.ReadSeeker, start int64) (bool, error) {
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return false, err
	}
	want, err := io.ReadAll(rs)
	if err != nil {
		return false, err
	}
	rc, err := s.drv.NewRangeReader(ctx, s.prefix+key, 0, -1)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, want), nil
}

// countingReader counts the bytes read through it and stops with ctx's
// error once ctx is done, so that every driver's copy loop ends promptly
// on cancellation, whether or not the provider's client watches ctx.
type countingReader struct {
	ctx context.Context
	r   io.Reader
	n   int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Stat returns the attributes of key.
func (s *Store) Stat(ctx context.Context, key string) (Attrs, error) {
	if err := s.check("stat", key); err != nil {
		return Attrs{}, err
	}
	var a Attrs
	err := s.do(ctx, OpStat, "stat", key, func(ctx context.Context, _ bool) (int64, error) {
		var err error
		a, err = s.drv.Stat(ctx, s.prefix+key)
		return 0, s.wrap(ctx, "stat", key, err)
	})
	return a, err
}

// List returns one page of up to pageSize objects (0: the driver's default,
// at most 1000) whose keys start with prefix, in lexicographic order. Pass
// the returned Next token to get the following page; Next is empty after the
// last page. Keys are relative to the store.
func (s *Store) List(ctx context.Context, prefix, token string, pageSize int) (ListPage, error) {
	if pageSize <= 0 || pageSize > 1000 {
		pageSize = 1000
	}
	var p ListPage
	err := s.do(ctx, OpList, "list", prefix, func(ctx context.Context, _ bool) (int64, error) {
		var err error
		p, err = s.drv.List(ctx, s.prefix+prefix, token, pageSize)
		return 0, s.wrap(ctx, "list", prefix, err)
	})
	if err != nil {
		return ListPage{}, err
	}
	for i := range p.Objects {
		p.Objects[i].Key = strings.TrimPrefix(p.Objects[i].Key, s.prefix)
	}
	return p, nil
}

// Walk calls fn for every object whose key starts with prefix, in
// lexicographic order, page by page. An error from fn stops the walk and is
// returned as is.
func (s *Store) Walk(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	token := ""
	for {
		p, err := s.List(ctx, prefix, token, 1000)
		if err != nil {
			return err
		}
		for _, o := range p.Objects {
			if err := fn(o); err != nil {
				return err
			}
		}
		if p.Next == "" {
			return nil
		}
		token = p.Next
	}
}

// Delete removes key. Deleting a missing key succeeds.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.check("delete", key); err != nil {
		return err
	}
	return s.do(ctx, OpDelete, "delete", key, func(ctx context.Context, _ bool) (int64, error) {
		err := s.wrap(ctx, "delete", key, s.drv.Delete(ctx, s.prefix+key))
		if errors.Is(err, ErrNotFound) {
			return 0, nil
		}
		return 0, err
	})
}
