package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

// Retention: which commits gc keeps. A volume's policy is the small
// mutable object retention.json, or DefaultRetention when it has none;
// gc (the command, and the mount in the background) applies it.
//
// Why its own object and not a field of volume.json: volume.json is
// written once with a conditional create and read by every open; it holds
// what every writer must agree on. A policy changes over the volume's life
// and nothing breaks if two `retention set` race (the last one wins) or if
// an older agentfs ignores it, so it lives beside volume.json as a plain
// PUT, like the head hints, and volumes without it need no migration.

// RetentionKey is the store key of a volume's retention policy.
const RetentionKey = "retention.json"

// Retention says which commits gc keeps besides the ones it always keeps:
// each branch's head, and every commit whose successor is younger than the
// grace period (readers following a branch may still be on it). Snapshots
// are always kept. A commit is kept when any rule keeps it; the zero value
// (no rule) keeps every commit.
//
// The tiers (Hourly, Daily, Weekly) keep, among the commits written within
// their duration, the newest of each UTC hour, day or week (weeks start on
// Monday). Because an hour's newest commit is also its day's newest when
// it is the last hour with a commit, and buckets never split, a commit a
// coarser tier will keep later is never removed by a finer tier earlier:
// running gc often or rarely ends with the same commits.
//
// Ages are measured from the commit objects' store modification times.
type Retention struct {
	// KeepLast keeps the newest N commits of each branch (0: no rule).
	KeepLast int `json:"keep_last,omitempty"`
	// KeepWithin keeps every commit written within this duration.
	KeepWithin time.Duration `json:"keep_within_ns,omitempty"`
	// Hourly keeps the newest commit of each hour within this duration.
	Hourly time.Duration `json:"hourly_ns,omitempty"`
	// Daily keeps the newest commit of each day within this duration.
	Daily time.Duration `json:"daily_ns,omitempty"`
	// Weekly keeps the newest commit of each week within this duration.
	Weekly time.Duration `json:"weekly_ns,omitempty"`
}

// DefaultRetention is the policy of a volume that has not set one: every
// commit of the last hour, the newest of each hour for a day, the newest
// of each day for a week. With a checkpoint every 5 s on a busy mount that
// is at most 720 + 23 + 6 commits per branch.
func DefaultRetention() Retention {
	return Retention{KeepWithin: time.Hour, Hourly: 24 * time.Hour, Daily: 7 * 24 * time.Hour}
}

// KeepsAll reports whether p keeps every commit.
func (p Retention) KeepsAll() bool {
	return p.KeepLast <= 0 && p.KeepWithin <= 0 && p.Hourly <= 0 && p.Daily <= 0 && p.Weekly <= 0
}

// Validate checks that no rule is negative.
func (p Retention) Validate() error {
	if p.KeepLast < 0 || p.KeepWithin < 0 || p.Hourly < 0 || p.Daily < 0 || p.Weekly < 0 {
		return fmt.Errorf("retention %+v: rules must not be negative: %w", p, ErrBadRetention)
	}
	return nil
}

// ErrBadRetention: a retention policy that cannot be applied.
var ErrBadRetention = errors.New("invalid retention policy")

// String describes the policy for reports, e.g. "every commit of the last
// 1h, the newest per hour for 24h, per day for 7d".
func (p Retention) String() string {
	if p.KeepsAll() {
		return "keep every commit"
	}
	var parts []string
	if p.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("the last %d per branch", p.KeepLast))
	}
	if p.KeepWithin > 0 {
		parts = append(parts, "every commit of the last "+FormatAge(p.KeepWithin))
	}
	var tiers []string
	for _, t := range p.tiers() {
		tiers = append(tiers, "per "+t.name+" for "+FormatAge(t.within))
	}
	if len(tiers) > 0 {
		parts = append(parts, "the newest "+strings.Join(tiers, ", "))
	}
	return "keep " + strings.Join(parts, "; ")
}

// FormatAge formats a duration in the largest whole unit of w (weeks), d
// (days), h, m, or Go's form otherwise: 7d, 24h, 90m, 1.5s.
func FormatAge(d time.Duration) string {
	for _, u := range []struct {
		sfx string
		d   time.Duration
	}{{"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}} {
		if d >= u.d && d%u.d == 0 {
			return fmt.Sprintf("%d%s", d/u.d, u.sfx)
		}
	}
	return d.String()
}

type tier struct {
	name   string
	within time.Duration
	unit   time.Duration
}

func (p Retention) tiers() []tier {
	var out []tier
	for _, t := range []tier{{"hour", p.Hourly, time.Hour}, {"day", p.Daily, 24 * time.Hour}, {"week", p.Weekly, 7 * 24 * time.Hour}} {
		if t.within > 0 {
			out = append(out, t)
		}
	}
	return out
}

// bucket returns the UTC hour, day or week (from Monday) t falls in.
// time.Truncate works on absolute time, whose zero (January 1 of year 1,
// UTC) is a Monday at midnight.
func bucket(t time.Time, unit time.Duration) time.Time { return t.Truncate(unit) }

// keep decides which of a branch's commits p keeps: mods are the commits'
// modification times in increasing commit order. The newest is always kept,
// and so is every commit whose successor was written less than grace
// before now.
func (p Retention) keep(mods []time.Time, now time.Time, grace time.Duration) []bool {
	n := len(mods)
	out := make([]bool, n)
	within := func(t time.Time, d time.Duration) bool {
		return d > 0 && !t.Before(now.Add(-d-clockSlack))
	}
	tiers := p.tiers()
	for i, m := range mods {
		if i == n-1 || p.KeepsAll() || p.KeepLast > 0 && i >= n-p.KeepLast ||
			within(m, p.KeepWithin) || within(mods[i+1], grace) {
			out[i] = true
			continue
		}
		for _, t := range tiers {
			// The newest of its bucket: its successor is in a later one.
			if within(m, t.within) && !bucket(mods[i+1], t.unit).Equal(bucket(m, t.unit)) {
				out[i] = true
				break
			}
		}
	}
	return out
}

// retentionFile is the JSON form of retention.json: durations in the units
// FormatAge writes (and Go's, which time.ParseDuration reads; days and
// weeks as "d" and "w").
type retentionFile struct {
	KeepLast   int    `json:"keep_last"`
	KeepWithin string `json:"keep_within"`
	Hourly     string `json:"hourly"`
	Daily      string `json:"daily"`
	Weekly     string `json:"weekly"`
}

// EncodeRetention returns the JSON form of p, as retention.json holds it.
func EncodeRetention(p Retention) []byte {
	b, _ := json.MarshalIndent(retentionFile{
		KeepLast: p.KeepLast, KeepWithin: FormatAge(p.KeepWithin),
		Hourly: FormatAge(p.Hourly), Daily: FormatAge(p.Daily), Weekly: FormatAge(p.Weekly),
	}, "", "  ")
	return append(b, '\n')
}

// DecodeRetention parses retention.json. Missing fields are rules not set.
func DecodeRetention(b []byte) (Retention, error) {
	var f retentionFile
	if err := json.Unmarshal(b, &f); err != nil {
		return Retention{}, fmt.Errorf("%s: %w: %w", RetentionKey, ErrCorrupt, err)
	}
	p := Retention{KeepLast: f.KeepLast}
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{f.KeepWithin, &p.KeepWithin}, {f.Hourly, &p.Hourly}, {f.Daily, &p.Daily}, {f.Weekly, &p.Weekly}} {
		v, err := ParseAge(d.s)
		if err != nil {
			return Retention{}, fmt.Errorf("%s: %w: %w", RetentionKey, ErrCorrupt, err)
		}
		*d.dst = v
	}
	if err := p.Validate(); err != nil {
		return Retention{}, fmt.Errorf("%s: %w", RetentionKey, err)
	}
	return p, nil
}

// ParseAge parses a duration as FormatAge writes it, or in Go's syntax,
// with w (weeks) and d (days) allowed before the Go part: 2w, 7d, 1d12h,
// 90m. "" and "0" are zero.
func ParseAge(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	if rest == "" || rest == "0" {
		return 0, nil
	}
	var total time.Duration
	for _, u := range []struct {
		sfx string
		d   time.Duration
	}{{"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}} {
		if num, after, ok := strings.Cut(rest, u.sfx); ok {
			n, err := strconv.ParseFloat(num, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("invalid duration %q (examples: 12h, 7d, 2w)", s)
			}
			total += time.Duration(n * float64(u.d))
			rest = after
		}
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("invalid duration %q (examples: 12h, 7d, 2w)", s)
		}
		total += d
	}
	return total, nil
}

// Retention returns the volume's retention policy: retention.json, or
// DefaultRetention with stored false when the volume has none.
func (r *Repo) Retention(ctx context.Context) (p Retention, stored bool, err error) {
	b, err := r.getObject(ctx, RetentionKey)
	if errors.Is(err, blobstore.ErrNotFound) {
		return DefaultRetention(), false, nil
	}
	if err != nil {
		return Retention{}, false, fmt.Errorf("read the retention policy of %s: %w", r.URL(), err)
	}
	p, err = DecodeRetention(b)
	if err != nil {
		return Retention{}, false, fmt.Errorf("%s: %w (set it again with `agentfs retention set`)", r.URL(), err)
	}
	return p, true, nil
}

// SetRetention stores p as the volume's policy; the next gc applies it.
func (r *Repo) SetRetention(ctx context.Context, p Retention) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := r.putObject(ctx, RetentionKey, EncodeRetention(p)); err != nil {
		return fmt.Errorf("store the retention policy of %s: %w", r.URL(), err)
	}
	return nil
}

// ResetRetention removes the volume's policy: DefaultRetention applies.
func (r *Repo) ResetRetention(ctx context.Context) error {
	if err := r.store.Delete(ctx, RetentionKey); err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("remove the retention policy of %s: %w", r.URL(), err)
	}
	return nil
}

// LastGCKey is the store key of the record of the last gc that applied
// the volume's own policy (GCOptions.VolumePolicy): a mutable hint that
// lets the mounts of a volume apply it about once per interval between
// them, instead of once per mount.
const LastGCKey = "gc/last.json"

// lastGC is the content of LastGCKey.
type lastGC struct {
	Time          time.Time `json:"time"`
	Host          string    `json:"host,omitempty"`
	CommitsPruned int       `json:"commits_pruned"`
	PacksSwept    int       `json:"packs_swept"`
	BytesFreed    int64     `json:"bytes_freed"`
}

// recordGC writes LastGCKey after a gc that applied the volume's policy.
func (r *Repo) recordGC(ctx context.Context, rep GCReport) error {
	host, _ := os.Hostname()
	b, _ := json.Marshal(lastGC{Time: rep.Now, Host: host, CommitsPruned: rep.CommitsPruned, PacksSwept: rep.PacksSwept, BytesFreed: rep.BytesFreed})
	return r.putObject(ctx, LastGCKey, b)
}

// LastGC returns when a gc last applied the volume's own policy, by the
// store's clock (the record's modification time); ok is false if none
// did (or the record is gone).
func (r *Repo) LastGC(ctx context.Context) (t time.Time, ok bool, err error) {
	a, err := r.store.Stat(ctx, LastGCKey)
	if errors.Is(err, blobstore.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the last gc of %s: %w", r.URL(), err)
	}
	return a.ModTime, true, nil
}

// Prunable returns how many commits gc with policy p and grace period
// grace (0: UploadGrace) would remove if it ran at now (by the local
// clock; gc itself uses the store's): a listing of commits/, no other
// reads. The mount's background gc uses it to skip runs that would only
// mark.
func (r *Repo) Prunable(ctx context.Context, p Retention, now time.Time, grace time.Duration) (int, error) {
	if grace <= 0 {
		grace = UploadGrace
	}
	plan, err := r.planRetention(ctx, p, now, grace)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range plan.branches {
		for _, c := range b.commits {
			if !c.keep {
				n++
			}
		}
	}
	return n, nil
}
