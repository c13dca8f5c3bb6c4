// Package changefeed is the in-process recorder of a mount's change feed:
// the FUSE layer (fs) records every change it serves — a path created,
// modified or deleted — and subscribers (the control socket's streaming
// call, fs/control) read them live or resume after an event they saw.
//
// A Feed keeps the last RingSize events in a ring. Event IDs are
// "EPOCH:SEQ": EPOCH names one Feed (one run of a mount server; a remount
// starts a new one), SEQ counts from 1. A subscriber that resumes from an ID
// this Feed no longer holds (older than the ring, another epoch, or not
// issued yet) first gets a reset: events may have been missed.
//
// Cost: a Feed records nothing until its first Subscribe (Active is one
// atomic load), so a mount nobody watches pays nothing on its request path;
// from then on, recording is one short critical section (the ring append
// and a non-blocking wake-up of each subscriber), never a wait for a
// subscriber. A subscriber reads from the shared ring with its own cursor;
// one that falls more than RingSize events behind is moved to the live end
// and told so with a reset (reason ReasonOverflow): a slow reader never
// slows the filesystem, and never makes the Feed hold more than RingSize
// events.
//
// Lock order: Feed.mu only; no callback runs under it.
package changefeed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RingSize is how many events a Feed keeps for subscribers that resume.
const RingSize = 4096

// Ops of an Event.
const (
	OpCreated  = "created"
	OpModified = "modified"
	OpDeleted  = "deleted"
	// OpReset is not a change: events may have been missed (see Event.Reason).
	OpReset = "reset"
)

// Types of the entry an Event names.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeOther   = "other"
)

// Reasons of resets.
const (
	// ReasonUnknownID: the ID a subscriber resumed from is not in the
	// ring (too old, or of another epoch: the workspace was remounted).
	ReasonUnknownID = "unknown_id"
	// ReasonOverflow: the subscriber fell more than RingSize events
	// behind; it continues from the live end.
	ReasonOverflow = "overflow"
	// ReasonReplaced: the namespace changed behind the FUSE layer's back
	// (a snapshot restore, a virtual discard, a read-only mount following
	// its branch): paths may have changed without events.
	ReasonReplaced = "replaced"
)

// ErrBadID: an ID that is not of the form EPOCH:SEQ.
var ErrBadID = errors.New("bad change feed id (want EPOCH:SEQ, as an event's id)")

// Event is one change, or a reset.
type Event struct {
	// ID is "EPOCH:SEQ". A reset's ID is the position the stream goes on
	// from (resuming after it does not repeat the reset).
	ID string `json:"id"`
	// Op is OpCreated, OpModified, OpDeleted or OpReset.
	Op string `json:"op"`
	// Path is relative to the mount's root, slash-separated ("" for a
	// reset).
	Path string `json:"path,omitempty"`
	// Type is TypeFile, TypeDir, TypeSymlink or TypeOther ("" for a reset).
	Type string `json:"type,omitempty"`
	// Time is when the change was served (UTC).
	Time time.Time `json:"time"`
	// Reason says why a reset happened ("" otherwise).
	Reason string `json:"reason,omitempty"`
}

// entry is an event in the ring; its ID is made when it is read.
type entry struct {
	seq    uint64
	op     string
	path   string
	typ    string
	time   time.Time
	reason string
}

// Feed records the changes of one mount. Its methods are safe for
// concurrent use.
type Feed struct {
	epoch  string
	active atomic.Bool // a subscriber came at least once: record
	now    func() time.Time

	mu     sync.Mutex
	ring   [RingSize]entry // guarded by mu; entry of seq s at s%RingSize
	last   uint64          // guarded by mu: seq of the newest event (0: none)
	subs   map[*Subscription]struct{}
	closed bool   // guarded by mu
	reason string // guarded by mu: why it closed
}

// New returns an empty Feed with a fresh random epoch.
func New() *Feed {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Feed{epoch: hex.EncodeToString(b[:]), now: time.Now, subs: map[*Subscription]struct{}{}}
}

// Epoch names this Feed in its IDs.
func (f *Feed) Epoch() string { return f.epoch }

// Active reports whether the Feed records: a subscriber came at least
// once. Recorders check it before they compute an event's path, so that a
// mount nobody watches pays one atomic load per change.
func (f *Feed) Active() bool { return f.active.Load() }

// Record adds a change (op OpCreated, OpModified or OpDeleted) of path
// (relative to the root) whose entry has type typ, and wakes the
// subscribers. It never blocks on them. Nothing is recorded before the
// first Subscribe or after Close.
func (f *Feed) Record(op, path, typ string) {
	if !f.active.Load() {
		return
	}
	f.add(entry{op: op, path: path, typ: typ})
}

// Reset records a reset with reason (ReasonReplaced): subscribers learn
// that paths may have changed without events. Consecutive resets of the
// same reason are recorded once.
func (f *Feed) Reset(reason string) {
	if !f.active.Load() {
		return
	}
	f.add(entry{op: OpReset, reason: reason})
}

func (f *Feed) add(e entry) {
	e.time = f.now().UTC()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	if e.op == OpReset && f.last > 0 {
		if p := &f.ring[f.last%RingSize]; p.op == OpReset && p.reason == e.reason {
			return
		}
	}
	f.last++
	e.seq = f.last
	f.ring[e.seq%RingSize] = e
	for s := range f.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Close ends the Feed (the mount is gone): subscribers get ErrClosed with
// reason once they have read what was recorded before. Later calls do
// nothing.
func (f *Feed) Close(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.closed, f.reason = true, reason
	for s := range f.subs {
		close(s.done)
	}
}

// ParseID splits an event ID into its epoch and sequence number.
func ParseID(id string) (epoch string, seq uint64, err error) {
	e, s, ok := strings.Cut(id, ":")
	if !ok || e == "" {
		return "", 0, fmt.Errorf("%q: %w", id, ErrBadID)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", id, ErrBadID)
	}
	return e, n, nil
}

func (f *Feed) id(seq uint64) string { return f.epoch + ":" + strconv.FormatUint(seq, 10) }

// Options of a subscription.
type Options struct {
	// Since resumes after the event with this ID; "" starts live (with
	// the next change). An ID the Feed does not hold starts live with a
	// reset (ReasonUnknownID). A malformed one is ErrBadID.
	Since string
	// Path keeps only the events at or below this path (relative to the
	// root, slash-separated, clean; "" for all), and the creations and
	// deletions of its ancestors (which bring or take the whole subtree).
	// Resets always pass.
	Path string
}

// Subscription reads a Feed. Next must not be called concurrently.
type Subscription struct {
	f      *Feed
	filter string
	wake   chan struct{} // capacity 1: new events
	done   chan struct{} // closed by Feed.Close
	next   uint64        // seq of the next event to read; guarded by f.mu
	reset  string        // a reset to deliver first ("" none); guarded by f.mu
}

// ErrClosed is returned by Next once the Feed closed and every event
// recorded before was read.
var ErrClosed = errors.New("change feed closed")

// Subscribe starts a subscription, which from then on makes the Feed
// record. Close it when done.
func (f *Feed) Subscribe(opts Options) (*Subscription, error) {
	f.active.Store(true)
	s := &Subscription{f: f, filter: strings.Trim(opts.Path, "/"), wake: make(chan struct{}, 1), done: make(chan struct{})}
	var epoch string
	var seq uint64
	if opts.Since != "" {
		var err error
		if epoch, seq, err = ParseID(opts.Since); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.next = f.last + 1
	switch {
	case opts.Since == "":
	case epoch == f.epoch && seq <= f.last && seq+RingSize >= f.last:
		s.next = seq + 1
	default:
		s.reset = ReasonUnknownID
	}
	if f.closed {
		close(s.done)
	} else {
		f.subs[s] = struct{}{}
	}
	return s, nil
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.f.mu.Lock()
	delete(s.f.subs, s)
	s.f.mu.Unlock()
}

// Next returns the next event that passes the subscription's filter,
// waiting for one until ctx ends (ctx.Err()) or the Feed closes (an error
// matching ErrClosed, with the Feed's reason, once every event recorded
// before was read).
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		ev, ok, err := s.take()
		if err != nil || ok {
			return ev, err
		}
		select {
		case <-s.wake:
		case <-s.done:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// take returns the next event if there is one.
func (s *Subscription) take() (Event, bool, error) {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.next+RingSize <= f.last {
		// Overwritten before it was read: go live.
		s.next, s.reset = f.last+1, ReasonOverflow
	}
	if s.reset != "" {
		r := s.reset
		s.reset = ""
		return Event{ID: f.id(s.next - 1), Op: OpReset, Time: f.now().UTC(), Reason: r}, true, nil
	}
	for s.next <= f.last {
		e := &f.ring[s.next%RingSize]
		s.next++
		if e.op != OpReset && !s.passes(e) {
			continue
		}
		return Event{ID: f.id(e.seq), Op: e.op, Path: e.path, Type: e.typ, Time: e.time, Reason: e.reason}, true, nil
	}
	if f.closed {
		return Event{}, false, fmt.Errorf("%w: %s", ErrClosed, f.reason)
	}
	return Event{}, false, nil
}

// passes reports whether e is at or below the filter, or creates or
// deletes one of its ancestors.
func (s *Subscription) passes(e *entry) bool {
	p, fl := e.path, s.filter
	switch {
	case fl == "" || p == fl:
		return true
	case strings.HasPrefix(p, fl) && p[len(fl)] == '/':
		return true
	case p == "" || strings.HasPrefix(fl, p) && fl[len(p)] == '/':
		return e.op != OpModified
	}
	return false
}
