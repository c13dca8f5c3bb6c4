package bench

import (
	"context"
	"time"
)

// MountProbe recognises agentfs mounts. The mount implements it over its
// control socket; bench itself never guesses. Detect is called once per
// target directory, before any workload runs, from the goroutine that calls
// Run.
type MountProbe interface {
	// Detect reports whether dir lies inside an agentfs mount and, if so,
	// returns a handle to that mount. It returns false for any other
	// directory, including other FUSE filesystems.
	Detect(dir string) (Mount, bool)
}

// Mount is a live agentfs mount that bench measures alongside its
// workloads. Its methods are called from the goroutine that calls Run,
// never while a workload runs in the mount.
type Mount interface {
	// Describe names the mount for the report, for example
	// "agentfs file:///var/agentfs/vol (branch main)".
	Describe() string
	// Stats returns the mount's cumulative counters since it was mounted.
	// bench reports the difference between two calls, so the counters must
	// never decrease while the mount lives.
	Stats(ctx context.Context) (MountStats, error)
	// Sync returns once everything written to the mount before the call is
	// in blob storage and reachable from a commit (what `agentfs sync`
	// does).
	Sync(ctx context.Context) error
}

// MountStats are the cumulative counters of an agentfs mount.
type MountStats struct {
	BlobPuts        int64 `json:"blob_puts"`        // PUT requests to the blob store, including conditional creates
	BlobGets        int64 `json:"blob_gets"`        // GET requests (whole or range)
	BytesUploaded   int64 `json:"bytes_uploaded"`   // payload bytes sent to the blob store
	BytesDownloaded int64 `json:"bytes_downloaded"` // payload bytes received from the blob store
	CacheHits       int64 `json:"cache_hits"`       // reads served by the local data cache
	CacheMisses     int64 `json:"cache_misses"`     // reads that had to fetch from the blob store
	// Requests counts the FUSE requests the mount served, by kind
	// ("LOOKUP", "GETXATTR", ...); nil when the mount does not say.
	Requests map[string]int64 `json:"requests,omitempty"`
}

// Sub returns the counters accumulated between before and s.
func (s MountStats) Sub(before MountStats) MountStats {
	return MountStats{
		BlobPuts:        s.BlobPuts - before.BlobPuts,
		BlobGets:        s.BlobGets - before.BlobGets,
		BytesUploaded:   s.BytesUploaded - before.BytesUploaded,
		BytesDownloaded: s.BytesDownloaded - before.BytesDownloaded,
		CacheHits:       s.CacheHits - before.CacheHits,
		CacheMisses:     s.CacheMisses - before.CacheMisses,
		Requests:        subCounts(s.Requests, before.Requests),
	}
}

// subCounts returns the positive differences of the counters in after and
// before, nil when after is nil.
func subCounts(after, before map[string]int64) map[string]int64 {
	if after == nil {
		return nil
	}
	d := map[string]int64{}
	for k, v := range after {
		if v > before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// mountRun is what one run of one workload cost a mount: the counters
// from just before the workload to the end of the Sync after it, and the
// time that Sync took.
type mountRun struct {
	delta MountStats
	sync  time.Duration
}
