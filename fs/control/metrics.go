package control

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentfs/agentfs/blobstore"
)

// MetricsPath is where a mount's control server answers with its metrics in
// the Prometheus text format (`agentfs mount --metrics ADDR` serves the same
// page over TCP).
const MetricsPath = "/metrics"

// MetricsHandler returns the handler of the mount's Prometheus metrics:
// the blob store's counters (agentfs_blobstore_*), the volume's state
// (agentfs_volume_*: its backlog, cache use and pinned files, commits and
// last checkpoint), the kernel's requests (agentfs_fuse_*) and, on a
// mount that serves history requests, its branch and snapshot counts
// (agentfs_volume_branches, agentfs_volume_snapshots). Every scrape reads
// the current values; counting branches and snapshots lists the store's
// refs, so scrape every few seconds at most.
func (s *Server) MetricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	if s.metrics != nil {
		reg.MustRegister(blobstore.NewCollector(s.metrics, nil))
	}
	reg.MustRegister(&mountCollector{s: s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// mountCollector exports the volume's status, the FUSE counters and the
// ref counts.
type mountCollector struct{ s *Server }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descDirtyFiles  = desc("agentfs_volume_dirty_files", "Files with blocks waiting to upload.")
	descDirtyDirs   = desc("agentfs_volume_dirty_dirs", "Directories whose trees wait to be rewritten.")
	descDirtyBytes  = desc("agentfs_volume_dirty_bytes", "Upper bound of the bytes waiting to upload.")
	descCacheBytes  = desc("agentfs_volume_cache_bytes", "Bytes of clean chunks in the local data cache.")
	descCacheLimit  = desc("agentfs_volume_cache_limit_bytes", "Bound of the local data cache.")
	descOpenFiles   = desc("agentfs_volume_open_files", "Files open through the mount.")
	descPinnedFiles = desc("agentfs_volume_pinned_files", "Files whose data file is pinned for FUSE passthrough.")
	descPinnedBytes = desc("agentfs_volume_pinned_bytes", "Clean cached bytes of the pinned files (counted in agentfs_volume_cache_bytes too; the pin budget counts each pinned file at its size instead).")
	descCommits     = desc("agentfs_volume_commits_total", "Commits this mount wrote.")
	descHeadSeq     = desc("agentfs_volume_head_seq", "Sequence number of the branch's last commit this mount wrote or loaded.")
	descCheckpoint  = desc("agentfs_volume_last_checkpoint_seconds", "Duration of the last checkpoint.")
	descCheckpointT = desc("agentfs_volume_last_checkpoint_timestamp_seconds", "Unix time of the last checkpoint (0: none yet).")
	descVolumeErr   = desc("agentfs_volume_error", "1 while the last checkpoint or lease renewal failed.")
	descBranches    = desc("agentfs_volume_branches", "Branches of the volume.")
	descSnapshots   = desc("agentfs_volume_snapshots", "Named snapshots of the volume.")
	descFuseCalls   = desc("agentfs_fuse_requests_total", "Kernel requests served, by kind.", "op")
	descFuseErrors  = desc("agentfs_fuse_errors_total", "Kernel requests answered with an errno, by kind.", "op")
	descFuseSeconds = desc("agentfs_fuse_request_seconds_total", "Time spent serving kernel requests, by kind.", "op")
)

// Describe implements prometheus.Collector.
func (c *mountCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDirtyFiles, descDirtyDirs, descDirtyBytes, descCacheBytes, descCacheLimit,
		descOpenFiles, descPinnedFiles, descPinnedBytes, descCommits, descHeadSeq, descCheckpoint, descCheckpointT, descVolumeErr, descBranches, descSnapshots,
		descFuseCalls, descFuseErrors, descFuseSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *mountCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if st, err := c.s.b.Status(ctx); err != nil {
		c.s.log.Debug("metrics: volume status failed", "err", err)
	} else {
		gauge(descDirtyFiles, float64(st.DirtyFiles))
		gauge(descDirtyDirs, float64(st.DirtyDirs))
		gauge(descDirtyBytes, float64(st.DirtyBytes))
		gauge(descCacheBytes, float64(st.CacheBytes))
		gauge(descCacheLimit, float64(st.CacheLimit))
		gauge(descOpenFiles, float64(st.OpenFiles))
		gauge(descPinnedFiles, float64(st.PinnedFiles))
		gauge(descPinnedBytes, float64(st.PinnedBytes))
		counter(descCommits, float64(st.Commits))
		gauge(descHeadSeq, float64(st.HeadSeq))
		gauge(descCheckpoint, st.LastCheckpointDur.Seconds())
		var ts float64
		if !st.LastCheckpoint.IsZero() {
			ts = float64(st.LastCheckpoint.UnixNano()) / 1e9
		}
		gauge(descCheckpointT, ts)
		failing := 0.0
		if st.LastError != "" || st.LeaseError != "" {
			failing = 1
		}
		gauge(descVolumeErr, failing)
	}
	if rc := c.s.refCounts(ctx); rc != nil {
		gauge(descBranches, float64(rc.Branches))
		gauge(descSnapshots, float64(rc.Snapshots))
	}
	for _, o := range c.s.b.Ops() {
		counter(descFuseCalls, float64(o.Calls), o.Op)
		counter(descFuseErrors, float64(o.Errors), o.Op)
		counter(descFuseSeconds, o.Time.Seconds(), o.Op)
	}
}

// Metrics returns the mount's metrics in the Prometheus text format.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agentfs"+MetricsPath, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("control socket %s: %w", c.socket, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("control socket %s: %w", c.socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("control socket %s: GET %s: HTTP %d: %s", c.socket, MetricsPath, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
