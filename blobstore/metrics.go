package blobstore

import (
	"sync/atomic"
	"time"
)

// Op names a Store operation in metrics.
type Op int

// The operations Store counts.
const (
	OpGet Op = iota
	OpPut
	OpPutIfAbsent
	OpStat
	OpList
	OpDelete
	numOps
)

var opNames = [numOps]string{"get", "put", "put_if_absent", "stat", "list", "delete"}

// String returns the op's name as used in metric labels (get, put,
// put_if_absent, stat, list, delete).
func (o Op) String() string {
	if o < 0 || o >= numOps {
		return "unknown"
	}
	return opNames[o]
}

// Ops lists every Op, for exporters.
func Ops() []Op { return []Op{OpGet, OpPut, OpPutIfAbsent, OpStat, OpList, OpDelete} }

// LatencyBuckets are the upper bounds of the latency histogram, in seconds.
var LatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

type opMetrics struct {
	calls    atomic.Int64 // logical calls (a retried call counts once)
	attempts atomic.Int64 // attempts sent to the driver
	errors   [lastKind + 1]atomic.Int64
	bytes    atomic.Int64
	latSum   atomic.Int64 // nanoseconds, per call including retries
	buckets  []atomic.Int64
}

// Metrics counts the operations of one or more Stores. It is safe for
// concurrent use; the zero value is not usable: use NewMetrics.
type Metrics struct {
	ops [numOps]opMetrics
}

// NewMetrics returns empty counters.
func NewMetrics() *Metrics {
	m := &Metrics{}
	for i := range m.ops {
		m.ops[i].buckets = make([]atomic.Int64, len(LatencyBuckets)+1)
	}
	return m
}

func (m *Metrics) observe(op Op, d time.Duration, n int64, err error) {
	o := &m.ops[op]
	o.calls.Add(1)
	o.bytes.Add(n)
	o.latSum.Add(int64(d))
	s := d.Seconds()
	i := 0
	for i < len(LatencyBuckets) && s > LatencyBuckets[i] {
		i++
	}
	o.buckets[i].Add(1)
	if err != nil {
		o.errors[KindOf(err)].Add(1)
	}
}

func (m *Metrics) attempt(op Op) { m.ops[op].attempts.Add(1) }

// OpStats is a point-in-time copy of the counters of one Op.
type OpStats struct {
	Calls    int64          // logical calls
	Attempts int64          // attempts including retries
	Errors   map[Kind]int64 // failed calls by kind (only non-zero kinds)
	Bytes    int64          // payload bytes read (get) or written (put)
	Latency  time.Duration  // sum of call latencies
	// Buckets[i] counts calls with latency <= LatencyBuckets[i] (not
	// cumulative); the last element counts the rest.
	Buckets []int64
}

// Snapshot returns a copy of the counters of op.
func (m *Metrics) Snapshot(op Op) OpStats {
	o := &m.ops[op]
	st := OpStats{
		Calls:    o.calls.Load(),
		Attempts: o.attempts.Load(),
		Bytes:    o.bytes.Load(),
		Latency:  time.Duration(o.latSum.Load()),
		Errors:   map[Kind]int64{},
		Buckets:  make([]int64, len(o.buckets)),
	}
	for k := range o.errors {
		if n := o.errors[k].Load(); n != 0 {
			st.Errors[Kind(k)] = n
		}
	}
	for i := range o.buckets {
		st.Buckets[i] = o.buckets[i].Load()
	}
	return st
}
