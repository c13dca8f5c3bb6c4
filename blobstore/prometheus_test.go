package blobstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func TestPrometheusCollector(t *testing.T) {
	ctx := context.Background()
	s, err := blobstore.Open(ctx, "mem://", blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, s)
	for range 3 {
		if err := s.Put(ctx, "k", []byte("12345")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "k", []byte("x")); !errors.Is(err, blobstore.ErrExists) {
		t.Fatal(err)
	}

	c := blobstore.NewCollector(s.Metrics(), prometheus.Labels{"store": "test"})
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	const want = `
# HELP agentfs_blobstore_operations_total Blob store calls, a retried call counted once.
# TYPE agentfs_blobstore_operations_total counter
agentfs_blobstore_operations_total{op="delete",store="test"} 0
agentfs_blobstore_operations_total{op="get",store="test"} 2
agentfs_blobstore_operations_total{op="list",store="test"} 0
agentfs_blobstore_operations_total{op="put",store="test"} 3
agentfs_blobstore_operations_total{op="put_if_absent",store="test"} 1
agentfs_blobstore_operations_total{op="stat",store="test"} 0
# HELP agentfs_blobstore_bytes_total Payload bytes read (get) or written (put, put_if_absent).
# TYPE agentfs_blobstore_bytes_total counter
agentfs_blobstore_bytes_total{op="delete",store="test"} 0
agentfs_blobstore_bytes_total{op="get",store="test"} 5
agentfs_blobstore_bytes_total{op="list",store="test"} 0
agentfs_blobstore_bytes_total{op="put",store="test"} 15
agentfs_blobstore_bytes_total{op="put_if_absent",store="test"} 1
agentfs_blobstore_bytes_total{op="stat",store="test"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentfs_blobstore_operations_total", "agentfs_blobstore_bytes_total"); err != nil {
		t.Error(err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	find := func(name string, labels map[string]string) *dto.Metric {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		next:
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
						continue next
					}
				}
				return m
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return nil
	}
	if v := find("agentfs_blobstore_errors_total", map[string]string{"op": "get", "kind": "not_found"}).GetCounter().GetValue(); v != 1 {
		t.Errorf("get not_found errors = %v, want 1", v)
	}
	if v := find("agentfs_blobstore_errors_total", map[string]string{"op": "put_if_absent", "kind": "exists"}).GetCounter().GetValue(); v != 1 {
		t.Errorf("put_if_absent exists errors = %v, want 1", v)
	}
	if v := find("agentfs_blobstore_errors_total", map[string]string{"op": "put", "kind": "transient"}).GetCounter().GetValue(); v != 0 {
		t.Errorf("put transient errors = %v, want 0", v)
	}
	if v := find("agentfs_blobstore_attempts_total", map[string]string{"op": "put"}).GetCounter().GetValue(); v != 3 {
		t.Errorf("put attempts = %v, want 3", v)
	}
	h := find("agentfs_blobstore_operation_duration_seconds", map[string]string{"op": "put"}).GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() <= 0 || len(h.GetBucket()) != len(blobstore.LatencyBuckets) {
		t.Errorf("put latency histogram: count %d sum %v buckets %d", h.GetSampleCount(), h.GetSampleSum(), len(h.GetBucket()))
	}
	var prev uint64
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() < prev {
			t.Errorf("histogram buckets are not cumulative: %v", h.GetBucket())
		}
		prev = b.GetCumulativeCount()
	}
	if prev > 3 {
		t.Errorf("last bucket %d exceeds the count 3", prev)
	}
}
