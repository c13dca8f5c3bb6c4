package snapshot

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// monday is a Monday at midnight UTC: days and weeks of the simulations
// start on bucket boundaries.
var monday = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// simulate writes a commit every interval from start+interval to last
// (offsets from monday), runs the policy's retention every gcEvery as gc
// does (dropping what it does not keep), once more at end, and returns the
// offsets of the commits left.
func simulate(p Retention, interval, last, gcEvery, end time.Duration) []time.Duration {
	var mods []time.Time
	apply := func(now time.Time) {
		keep := p.keep(mods, now, UploadGrace)
		var kept []time.Time
		for i, m := range mods {
			if keep[i] {
				kept = append(kept, m)
			}
		}
		mods = kept
	}
	nextGC := gcEvery
	for t := interval; t <= last; t += interval {
		for ; nextGC < t; nextGC += gcEvery {
			apply(monday.Add(nextGC))
		}
		mods = append(mods, monday.Add(t))
	}
	apply(monday.Add(end))
	out := make([]time.Duration, len(mods))
	for i, m := range mods {
		out[i] = m.Sub(monday)
	}
	return out
}

// span returns from, from+step, …, to.
func span(from, to, step time.Duration) []time.Duration {
	var out []time.Duration
	for t := from; t <= to; t += step {
		out = append(out, t)
	}
	return out
}

func union(sets ...[]time.Duration) []time.Duration {
	var out []time.Duration
	for _, s := range sets {
		out = append(out, s...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

const (
	hour = time.Hour
	day  = 24 * time.Hour
)

// TestRetentionSimulated runs days and weeks of checkpoints against a
// policy, with gc running every few minutes on an injected clock, and
// checks the commits left; it also checks that one gc at the end leaves
// the same (a finer tier never removes what a coarser one keeps later).
func TestRetentionSimulated(t *testing.T) {
	cases := []struct {
		name                    string
		p                       Retention
		interval, last, gc, end time.Duration
		want                    []time.Duration
	}{
		{
			// Every commit of the last hour (and the one before it, whose
			// successor is younger than the grace period), and each
			// hour's newest: 23 + 13.
			name: "a day of 5-minute checkpoints, default policy",
			p:    DefaultRetention(), interval: 5 * time.Minute, last: day, gc: 10 * time.Minute, end: day,
			want: union(span(55*time.Minute, 22*hour+55*time.Minute, hour), span(23*hour, day, 5*time.Minute)),
		},
		{
			// Each day's newest for a week, each hour's newest of the last
			// day, everything of the last hour: 6 + 23 + 7.
			name: "a week of 10-minute checkpoints, default policy",
			p:    DefaultRetention(), interval: 10 * time.Minute, last: 7 * day, gc: hour, end: 7 * day,
			want: union(span(23*hour+50*time.Minute, 5*day+23*hour+50*time.Minute, day),
				span(6*day+50*time.Minute, 6*day+22*hour+50*time.Minute, hour),
				span(6*day+23*hour, 7*day, 10*time.Minute)),
		},
		{
			name: "a branch idle for six and a half days keeps its head and its last day's newest",
			p:    DefaultRetention(), interval: 5 * time.Minute, last: day, gc: hour, end: 7*day + 12*hour,
			want: []time.Duration{23*hour + 55*time.Minute, day},
		},
		{
			name: "a branch idle for longer than a week keeps its head",
			p:    DefaultRetention(), interval: 5 * time.Minute, last: day, gc: 6 * hour, end: 9 * day,
			want: []time.Duration{day},
		},
		{
			// Weeks start on Monday: each week's newest is its Sunday.
			name: "weekly for four weeks, a commit every midnight for five",
			p:    Retention{Weekly: 4 * 7 * day}, interval: day, last: 34 * day, gc: day, end: 35 * day,
			want: []time.Duration{13 * day, 20 * day, 27 * day, 34 * day},
		},
		{
			// Hourly commits: the last 3, of which the two before the head
			// are also protected by the grace period.
			name: "keep the last 3",
			p:    Retention{KeepLast: 3}, interval: hour, last: day, gc: 4 * hour, end: day,
			want: []time.Duration{22 * hour, 23 * hour, day},
		},
		{
			name: "no rule keeps every commit",
			p:    Retention{}, interval: hour, last: day, gc: 4 * hour, end: 30 * day,
			want: span(hour, day, hour),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := simulate(c.p, c.interval, c.last, c.gc, c.end)
			if !slices.Equal(got, c.want) {
				t.Errorf("kept %d commits:\n%v\nwant %d:\n%v", len(got), got, len(c.want), c.want)
			}
			if once := simulate(c.p, c.interval, c.last, c.end+c.gc, c.end); !slices.Equal(once, got) {
				t.Errorf("one gc at the end keeps %v, gc every %v keeps %v", once, c.gc, got)
			}
		})
	}
}

func TestRetentionEncoding(t *testing.T) {
	golden(t, "retention.json", EncodeRetention(DefaultRetention()))
	for _, p := range []Retention{DefaultRetention(), {}, {KeepLast: 5, KeepWithin: 90 * time.Minute, Weekly: 2 * 7 * day}, {Daily: 36 * hour}} {
		got, err := DecodeRetention(EncodeRetention(p))
		if err != nil || got != p {
			t.Errorf("%+v: decoded %+v, %v", p, got, err)
		}
	}
	for _, bad := range []string{`{"keep_last": -1}`, `{"daily": "x"}`, `{"hourly": "-1h"}`, `[`} {
		if _, err := DecodeRetention([]byte(bad)); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
	// Missing fields are rules not set.
	if p, err := DecodeRetention([]byte(`{"daily": "7d"}`)); err != nil || p != (Retention{Daily: 7 * day}) {
		t.Errorf("partial: %+v %v", p, err)
	}
	if s := DefaultRetention().String(); s != "keep every commit of the last 1h; the newest per hour for 1d, per day for 1w" {
		t.Errorf("String: %q", s)
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "0": 0, "7d": 7 * day, "2w": 14 * day, "1d12h": 36 * hour, "90m": 90 * time.Minute, "1.5d": 36 * hour} {
		if got, err := ParseAge(in); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "-1d", "d", "1y", "-3h"} {
		if _, err := ParseAge(bad); err == nil {
			t.Errorf("ParseAge(%q) accepted", bad)
		}
	}
	for _, d := range []time.Duration{hour, day, 7 * day, 36 * hour, 90 * time.Minute, 1500 * time.Millisecond} {
		if got, err := ParseAge(FormatAge(d)); err != nil || got != d {
			t.Errorf("FormatAge(%v) = %q parses to %v, %v", d, FormatAge(d), got, err)
		}
	}
}

func FuzzDecodeRetention(f *testing.F) {
	f.Add(EncodeRetention(DefaultRetention()))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeRetention(data)
		if err != nil {
			return
		}
		again, err := DecodeRetention(EncodeRetention(p))
		if err != nil || again != p {
			t.Fatalf("%+v re-decodes as %+v, %v", p, again, err)
		}
	})
}

func TestRepoRetentionStored(t *testing.T) {
	r := protoRepo(t)
	ctx := context.Background()
	p, stored, err := r.Retention(ctx)
	if err != nil || stored || p != DefaultRetention() {
		t.Fatalf("fresh volume: %+v %v %v", p, stored, err)
	}
	want := Retention{KeepLast: 10, Daily: 30 * day}
	if err := r.SetRetention(ctx, want); err != nil {
		t.Fatal(err)
	}
	if p, stored, err = r.Retention(ctx); err != nil || !stored || p != want {
		t.Fatalf("after set: %+v %v %v", p, stored, err)
	}
	if err := r.SetRetention(ctx, Retention{KeepLast: -1}); err == nil {
		t.Fatal("negative policy stored")
	}
	if err := r.ResetRetention(ctx); err != nil {
		t.Fatal(err)
	}
	if p, stored, err = r.Retention(ctx); err != nil || stored || p != DefaultRetention() {
		t.Fatalf("after reset: %+v %v %v", p, stored, err)
	}
	if err := r.store.Put(ctx, RetentionKey, []byte("{")); err != nil {
		t.Fatal(err)
	}
	if _, _, err = r.Retention(ctx); err == nil || !strings.Contains(err.Error(), "retention set") {
		t.Fatalf("corrupt policy: %v", err)
	}
}
