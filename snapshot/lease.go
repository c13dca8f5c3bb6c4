package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

// Leases: one writer per branch. A lease is a sequence of epoch objects
// leases/<branch>/<epoch>; the newest epoch is the current one. Taking the
// branch means creating epoch N+1 with a conditional write, which exactly one
// contender wins; the holder renews by rewriting its own epoch with a later
// expiry. Correctness never rests on the lease — commits are created with
// conditional writes — it exists so a second writer gets a clear error
// naming the first.

// ErrLeaseLost: another writer took the branch (our lease had expired).
var ErrLeaseLost = errors.New("lease lost to another writer")

// Holder identifies a writer in a lease.
type Holder struct {
	ID      string    `json:"id"` // unique per writer process
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Mount   string    `json:"mount,omitempty"` // mountpoint, for messages
	Started time.Time `json:"started"`
}

func (h Holder) String() string {
	s := fmt.Sprintf("writer %s on host %s (pid %d", h.ID, h.Host, h.PID)
	if h.Mount != "" {
		s += ", mounted at " + h.Mount
	}
	return s + ")"
}

type leaseRecord struct {
	Holder   Holder    `json:"holder"`
	Expires  time.Time `json:"expires"`
	Released bool      `json:"released,omitempty"`
}

// LeaseHeldError is returned when a live writer holds the branch. It matches
// ErrLeaseHeld.
type LeaseHeldError struct {
	Branch  string
	Holder  Holder
	Expires time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("branch %q is held by %s until %s: mount it --read-only, fork it, or stop that writer",
		e.Branch, e.Holder, e.Expires.Format(time.RFC3339))
}

// Is matches ErrLeaseHeld.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// Lease is a held writer lease on a branch. Its methods are not safe for
// concurrent use; one goroutine renews it.
type Lease struct {
	r      *Repo
	branch string
	epoch  uint64
	holder Holder
	ttl    time.Duration
}

func leaseKey(branch string, epoch uint64) string {
	return fmt.Sprintf("leases/%s/%016x", branch, epoch)
}

// latestLease returns the newest epoch of branch's lease and its record
// (epoch 0 when none exists), plus the older epochs' keys.
func (r *Repo) latestLease(ctx context.Context, branch string) (uint64, *leaseRecord, []string, error) {
	var epochs []uint64
	var keys []string
	err := r.store.Walk(ctx, "leases/"+branch+"/", func(o blobstore.ObjectInfo) error {
		name := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		if n, err := strconv.ParseUint(name, 16, 64); err == nil {
			epochs = append(epochs, n)
			keys = append(keys, o.Key)
		}
		return nil
	})
	if err != nil {
		return 0, nil, nil, fmt.Errorf("list leases of %s: %w", branch, err)
	}
	if len(epochs) == 0 {
		return 0, nil, nil, nil
	}
	last := epochs[len(epochs)-1]
	b, err := r.getObject(ctx, leaseKey(branch, last))
	if errors.Is(err, blobstore.ErrNotFound) {
		return last, nil, keys[:len(keys)-1], nil
	}
	if errors.Is(err, ErrCorrupt) {
		b = nil // tampered or sealed under another key: unreadable
	} else if err != nil {
		return 0, nil, nil, fmt.Errorf("read lease of %s: %w", branch, err)
	}
	// An unreadable lease protects nothing: it counts as released.
	return last, decodeLease(b), keys[:len(keys)-1], nil
}

// decodeLease parses a lease record; nil if it does not parse.
func decodeLease(b []byte) *leaseRecord {
	var rec leaseRecord
	if json.Unmarshal(b, &rec) != nil {
		return nil
	}
	return &rec
}

// AcquireLease takes the writer lease of branch for holder, valid for ttl
// from now. It fails with a *LeaseHeldError if another holder's lease is
// live; a lease is dead when released, expired, or when stale(holder)
// reports its holder gone (for example a dead process on this host; stale
// may be nil).
func (r *Repo) AcquireLease(ctx context.Context, branch string, h Holder, ttl time.Duration, now time.Time, stale func(Holder) bool) (*Lease, error) {
	if err := ValidateName("branch", branch); err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 5; attempt++ {
		epoch, rec, old, err := r.latestLease(ctx, branch)
		if err != nil {
			return nil, err
		}
		if rec != nil && !rec.Released && now.Before(rec.Expires) && rec.Holder.ID != h.ID &&
			(stale == nil || !stale(rec.Holder)) {
			return nil, &LeaseHeldError{Branch: branch, Holder: rec.Holder, Expires: rec.Expires}
		}
		b, _ := json.Marshal(leaseRecord{Holder: h, Expires: now.Add(ttl)})
		err = r.putObjectIfAbsent(ctx, leaseKey(branch, epoch+1), b)
		if errors.Is(err, blobstore.ErrExists) {
			continue // someone else moved first: look again
		}
		if err != nil {
			return nil, fmt.Errorf("acquire lease of %s: %w", branch, err)
		}
		for _, k := range old {
			_ = r.store.Delete(ctx, k)
		}
		if epoch > 0 {
			_ = r.store.Delete(ctx, leaseKey(branch, epoch))
		}
		return &Lease{r: r, branch: branch, epoch: epoch + 1, holder: h, ttl: ttl}, nil
	}
	return nil, fmt.Errorf("acquire lease of %s: too many concurrent contenders", branch)
}

// Renew extends the lease to now+ttl. It returns ErrLeaseLost if another
// writer has taken the branch, and an error matching ErrVolumeChanged,
// writing nothing, if the store no longer holds the lease's volume.
func (l *Lease) Renew(ctx context.Context, now time.Time) error {
	if err := l.r.CheckVolume(ctx); err != nil {
		return fmt.Errorf("renew lease of %s: %w", l.branch, err)
	}
	if _, err := l.r.store.Stat(ctx, leaseKey(l.branch, l.epoch+1)); err == nil {
		return fmt.Errorf("branch %s: %w", l.branch, ErrLeaseLost)
	} else if !errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("renew lease of %s: %w", l.branch, err)
	}
	b, _ := json.Marshal(leaseRecord{Holder: l.holder, Expires: now.Add(l.ttl)})
	if err := l.r.putObject(ctx, leaseKey(l.branch, l.epoch), b); err != nil {
		return fmt.Errorf("renew lease of %s: %w", l.branch, err)
	}
	return nil
}

// Release marks the lease released so the next writer need not wait for it
// to expire. Like Renew, it writes nothing to a store that no longer holds
// the lease's volume.
func (l *Lease) Release(ctx context.Context) error {
	if err := l.r.CheckVolume(ctx); err != nil {
		return fmt.Errorf("release lease of %s: %w", l.branch, err)
	}
	b, _ := json.Marshal(leaseRecord{Holder: l.holder, Expires: time.Time{}, Released: true})
	if err := l.r.putObject(ctx, leaseKey(l.branch, l.epoch), b); err != nil {
		return fmt.Errorf("release lease of %s: %w", l.branch, err)
	}
	return nil
}

// Branch returns the branch the lease holds.
func (l *Lease) Branch() string { return l.branch }

// Holder returns the lease's holder.
func (l *Lease) Holder() Holder { return l.holder }

// TTL returns how long each renewal extends the lease.
func (l *Lease) TTL() time.Duration { return l.ttl }

// LeaseInfo describes the current lease of a branch.
type LeaseInfo struct {
	Holder  Holder
	Expires time.Time
	Live    bool // not released and not expired at the time asked
}

// CurrentLease returns the branch's current lease, or nil if none was ever
// taken or the last was released.
func (r *Repo) CurrentLease(ctx context.Context, branch string, now time.Time) (*LeaseInfo, error) {
	_, rec, _, err := r.latestLease(ctx, branch)
	if err != nil || rec == nil || rec.Released {
		return nil, err
	}
	return &LeaseInfo{Holder: rec.Holder, Expires: rec.Expires, Live: now.Before(rec.Expires)}, nil
}
