package bench

import (
	"fmt"
	"io"
	"math"
)

// WriteObjTable writes r as the readable table `agentfs objbench` prints:
// one line per cell and operation kind.
func WriteObjTable(w io.Writer, r *ObjReport) error {
	ew := &errWriter{w: w}
	ew.printf("agentfs objbench: %s (prefix %s, removed afterwards), %s; %s\n", r.URL, r.Prefix, r.Elapsed.Round(1e8), r.Machine)
	ew.printf("figures: one run per cell; latency percentiles over every operation; retries = attempts beyond the first\n\n")
	t := &textTable{left: 0}
	t.add("size", "conc", "objects", "op", "ops/s", "MiB/s", "p50", "p99", "max", "retries")
	for _, c := range r.Cells {
		for i, o := range c.Ops {
			size, conc, objs := "", "", ""
			if i == 0 {
				size, conc, objs = fmtSize(c.Size), fmt.Sprint(c.Concurrency), fmt.Sprint(c.Objects)
			}
			mib := "-"
			if o.Bytes > 0 {
				mib = fmtNum(o.MiBPerSec)
			}
			t.add(size, conc, objs, o.Op, fmtNum(o.OpsPerSec), mib,
				fmtDur(o.Latency.P50), fmtDur(o.Latency.P99), fmtDur(o.Latency.Max), fmt.Sprint(o.Retries))
		}
	}
	ew.printf("%s", t)
	for _, c := range r.Cells {
		if c.RaceWinners > 0 {
			ew.printf("\nconditional create race: %d simultaneous creates of one key, %d won (must be 1)", c.Concurrency, c.RaceWinners)
		}
	}
	if len(r.Skipped) > 0 {
		ew.printf("\n\nskipped cells:\n")
		for _, s := range r.Skipped {
			ew.printf("  %s at concurrency %d: %s\n", fmtSize(s.Size), s.Concurrency, s.Reason)
		}
	} else {
		ew.printf("\n")
	}
	if r.Cleaned > 0 {
		ew.printf("clean-up removed %d object(s) no measured delete covered\n", r.Cleaned)
	}
	return ew.err
}

// WriteObjSVG writes r as bar charts: put and get throughput (MiB/s, log
// scale) by object size and concurrency, and the operation rates of the
// smallest objects by operation kind and concurrency.
func WriteObjSVG(w io.Writer, r *ObjReport) error {
	var sizes []int64
	var concs []int
	seenS, seenC := map[int64]bool{}, map[int]bool{}
	for _, c := range r.Cells {
		if !seenS[c.Size] {
			seenS[c.Size] = true
			sizes = append(sizes, c.Size)
		}
		if !seenC[c.Concurrency] {
			seenC[c.Concurrency] = true
			concs = append(concs, c.Concurrency)
		}
	}
	var series []string
	for _, n := range concs {
		series = append(series, fmt.Sprintf("concurrency %d", n))
	}
	lookup := func(size int64, conc int, op string) (ObjOpResult, bool) {
		for _, c := range r.Cells {
			if c.Size == size && c.Concurrency == conc {
				return c.Op(op)
			}
		}
		return ObjOpResult{}, false
	}
	// row is a chart's bars for one size and op, one per concurrency
	// (NaN where no cell measured it).
	row := func(size int64, op string, value func(ObjOpResult) float64) []float64 {
		vs := make([]float64, len(concs))
		for j, n := range concs {
			vs[j] = math.NaN()
			if o, ok := lookup(size, n, op); ok {
				vs[j] = value(o)
			}
		}
		return vs
	}
	mibPerSec := func(o ObjOpResult) float64 { return o.MiBPerSec }
	opsPerSec := func(o ObjOpResult) float64 { return o.OpsPerSec }
	var charts []barChart
	for _, op := range []string{ObjPut, ObjGet} {
		c := barChart{Title: op + " throughput by object size", YLabel: "MiB/s (log)", Series: series, Log: true}
		for _, s := range sizes {
			c.Groups = append(c.Groups, fmtSize(s))
			c.Values = append(c.Values, row(s, op, mibPerSec))
		}
		charts = append(charts, c)
	}
	if len(sizes) > 0 {
		small := sizes[0]
		for _, s := range sizes {
			small = min(small, s)
		}
		c := barChart{Title: fmt.Sprintf("operations per second on %s objects", fmtSize(small)), YLabel: "ops/s (log)", Series: series, Log: true}
		for _, op := range ObjOps() {
			c.Groups = append(c.Groups, op)
			c.Values = append(c.Values, row(small, op, opsPerSec))
		}
		charts = append(charts, c)
	}
	sub := fmt.Sprintf("%s, %s; %s", r.URL, r.Started.Format("2006-01-02 15:04 UTC"), r.Machine)
	return writeSVG(w, "agentfs objbench", sub, charts)
}
