package blobstore

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports a Metrics as Prometheus metrics. Register it with a
// prometheus.Registerer; every scrape reads the counters afresh. It is safe
// for concurrent use.
//
// The metrics, all labelled by op (get, put, put_if_absent, stat, list,
// delete), plus any constant labels given to NewCollector:
//
//	agentfs_blobstore_operations_total            logical calls (a retried call counts once)
//	agentfs_blobstore_attempts_total              attempts sent to the driver, retries included
//	agentfs_blobstore_errors_total{kind}          failed calls by error kind (not_found, exists,
//	                                              transient, permanent, canceled,
//	                                              out_of_space, unknown)
//	agentfs_blobstore_bytes_total                 payload bytes read (get) or written (put*)
//	agentfs_blobstore_operation_duration_seconds  histogram of call latency, retries included
type Collector struct {
	m        *Metrics
	ops      *prometheus.Desc
	attempts *prometheus.Desc
	errors   *prometheus.Desc
	bytes    *prometheus.Desc
	latency  *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector for m. constLabels (may be nil) are added
// to every metric, e.g. {"store": "workspace"} when several Metrics are
// exported from one process; two Collectors registered with one registry
// must differ in them.
func NewCollector(m *Metrics, constLabels prometheus.Labels) *Collector {
	const ns, sub = "agentfs", "blobstore"
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, sub, name), help, labels, constLabels)
	}
	return &Collector{
		m:        m,
		ops:      d("operations_total", "Blob store calls, a retried call counted once.", "op"),
		attempts: d("attempts_total", "Blob store attempts sent to the driver, retries included.", "op"),
		errors:   d("errors_total", "Failed blob store calls by error kind.", "op", "kind"),
		bytes:    d("bytes_total", "Payload bytes read (get) or written (put, put_if_absent).", "op"),
		latency:  d("operation_duration_seconds", "Latency of blob store calls, retries included.", "op"),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ops, c.attempts, c.errors, c.bytes, c.latency} {
		ch <- d
	}
}

// kindLabel is the value of the kind label: Kind.String in snake case.
func kindLabel(k Kind) string { return strings.ReplaceAll(k.String(), " ", "_") }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, op := range Ops() {
		st := c.m.Snapshot(op)
		name := op.String()
		ch <- prometheus.MustNewConstMetric(c.ops, prometheus.CounterValue, float64(st.Calls), name)
		ch <- prometheus.MustNewConstMetric(c.attempts, prometheus.CounterValue, float64(st.Attempts), name)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(st.Bytes), name)
		for k := KindUnknown; k <= lastKind; k++ {
			ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(st.Errors[k]), name, kindLabel(k))
		}
		// Snapshot's buckets are per interval; Prometheus wants them
		// cumulative. The count is their total, so the histogram is
		// consistent even if calls finish during the snapshot.
		buckets := make(map[float64]uint64, len(LatencyBuckets))
		var cum uint64
		for i, ub := range LatencyBuckets {
			cum += uint64(st.Buckets[i])
			buckets[ub] = cum
		}
		cum += uint64(st.Buckets[len(LatencyBuckets)])
		ch <- prometheus.MustNewConstHistogram(c.latency, cum, st.Latency.Seconds(), buckets, name)
	}
}
