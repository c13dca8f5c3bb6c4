package bench

import (
	"encoding/json"
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 <= p <= 100) of xs by linear
// interpolation between the two closest ranks (the method numpy and R use
// by default): the 0th is the minimum, the 100th the maximum, the 50th the
// median. xs need not be sorted and is not modified. It returns NaN for an
// empty xs or a p outside [0, 100].
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 || math.IsNaN(p) || p < 0 || p > 100 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	rank := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	frac := rank - float64(lo)
	return s[lo] + (s[hi]-s[lo])*frac
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), or NaN for an empty xs.
func Median(xs []float64) float64 { return Percentile(xs, 50) }

// Summary describes a set of repeated measurements of one quantity.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// Spread is (Max-Min)/Median: 0.1 means the repeats span 10% of the
	// median. It is 0 for a single sample and NaN when Median is 0.
	Spread float64 `json:"spread"`
}

// Summarize returns the Summary of xs; the zero Summary (N == 0) for an
// empty xs.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sm := Summary{N: len(s), Median: percentileSorted(s, 50), Min: s[0], Max: s[len(s)-1]}
	switch {
	case len(s) == 1:
		sm.Spread = 0
	case sm.Median == 0:
		sm.Spread = math.NaN()
	default:
		sm.Spread = (sm.Max - sm.Min) / sm.Median
	}
	return sm
}

// Latency holds latency percentiles of a set of operations.
type Latency struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P90 time.Duration `json:"p90_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// LatencyOf returns the percentiles of ds (not modified), or the zero
// Latency (N == 0) for an empty ds.
func LatencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = float64(d)
	}
	slices.Sort(s)
	at := func(p float64) time.Duration { return time.Duration(math.Round(percentileSorted(s, p))) }
	return Latency{N: len(ds), P50: at(50), P90: at(90), P99: at(99), Max: time.Duration(s[len(s)-1])}
}

// MarshalJSON encodes s with a non-finite Spread (a zero median with
// differing samples) as null, which JSON can represent.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	out := struct {
		plain
		Spread *float64 `json:"spread"`
	}{plain: plain(s)}
	if !math.IsNaN(s.Spread) && !math.IsInf(s.Spread, 0) {
		v := s.Spread
		out.Spread = &v
	}
	return json.Marshal(out)
}

// UnmarshalJSON is the inverse of MarshalJSON: a null spread becomes NaN.
func (s *Summary) UnmarshalJSON(b []byte) error {
	type plain Summary
	var in struct {
		plain
		Spread *float64 `json:"spread"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*s = Summary(in.plain)
	s.Spread = math.NaN()
	if in.Spread != nil {
		s.Spread = *in.Spread
	}
	return nil
}
