package bench

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	xs := []float64{15, 20, 35, 40, 50} // numpy.percentile(xs, p), linear
	cases := []struct {
		p, want float64
	}{
		{0, 15}, {25, 20}, {40, 29}, {50, 35}, {90, 46}, {99, 49.6}, {100, 50},
	}
	for _, c := range cases {
		if got := Percentile(xs, c.p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Percentile(%v, %v) = %v, want %v", xs, c.p, got, c.want)
		}
	}
	if xs[0] != 15 || xs[4] != 50 {
		t.Errorf("Percentile modified its input: %v", xs)
	}
	unsorted := []float64{50, 15, 40, 20, 35}
	if got := Percentile(unsorted, 25); got != 20 {
		t.Errorf("Percentile of unsorted input = %v, want 20", got)
	}
	for _, bad := range []struct {
		xs []float64
		p  float64
	}{{nil, 50}, {xs, -1}, {xs, 101}, {xs, math.NaN()}} {
		if got := Percentile(bad.xs, bad.p); !math.IsNaN(got) {
			t.Errorf("Percentile(%v, %v) = %v, want NaN", bad.xs, bad.p, got)
		}
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("Percentile of one value = %v, want 7", got)
	}
}

func TestMedian(t *testing.T) {
	cases := []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5}, 5},
	}
	for _, c := range cases {
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{110, 90, 100})
	want := Summary{N: 3, Median: 100, Min: 90, Max: 110, Spread: 0.2}
	if s.N != want.N || s.Median != want.Median || s.Min != want.Min || s.Max != want.Max || math.Abs(s.Spread-want.Spread) > 1e-12 {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	if one := Summarize([]float64{42}); one.Spread != 0 || one.Median != 42 || one.N != 1 {
		t.Errorf("Summarize of one value = %+v", one)
	}
	if z := Summarize(nil); z.N != 0 {
		t.Errorf("Summarize(nil) = %+v, want the zero Summary", z)
	}
	if zero := Summarize([]float64{0, 0, 0}); zero.Spread != 0 && !math.IsNaN(zero.Spread) {
		t.Errorf("spread of all zeros = %v", zero.Spread)
	}
	if undefined := Summarize([]float64{0, 0, 5}); !math.IsNaN(undefined.Spread) {
		t.Errorf("spread with a zero median and differing samples = %v, want NaN", undefined.Spread)
	}
}

func TestSummaryJSON(t *testing.T) {
	for _, s := range []Summary{
		{N: 3, Median: 100, Min: 90, Max: 110, Spread: 0.2},
		{N: 3, Median: 0, Min: 0, Max: 5, Spread: math.NaN()},
	} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", s, err)
		}
		var back Summary
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		same := back.N == s.N && back.Median == s.Median && back.Min == s.Min && back.Max == s.Max &&
			(back.Spread == s.Spread || math.IsNaN(back.Spread) && math.IsNaN(s.Spread))
		if !same {
			t.Errorf("round trip of %+v through %s gave %+v", s, b, back)
		}
	}
	b, err := json.Marshal(Summary{N: 2, Spread: math.NaN()})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"n":2,"median":0,"min":0,"max":0,"spread":null}`; string(b) != want {
		t.Errorf("NaN spread encodes as %s, want %s", b, want)
	}
}

func TestLatencyOf(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := LatencyOf(ds)
	if l.N != 100 || l.Max != 100*time.Millisecond {
		t.Errorf("LatencyOf: %+v", l)
	}
	// Linear interpolation: rank p/100*99 over 1..100 ms.
	if want := 50500 * time.Microsecond; l.P50 != want {
		t.Errorf("p50 = %v, want %v", l.P50, want)
	}
	if want := 99010 * time.Microsecond; l.P99 != want {
		t.Errorf("p99 = %v, want %v", l.P99, want)
	}
	if z := LatencyOf(nil); z.N != 0 || z.P99 != 0 {
		t.Errorf("LatencyOf(nil) = %+v", z)
	}
}
