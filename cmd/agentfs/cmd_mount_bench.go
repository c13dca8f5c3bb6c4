package main

import (
	"context"
	"fmt"

	"github.com/agentfs/agentfs/bench"
	"github.com/agentfs/agentfs/fs/control"
)

// The mount lets `agentfs bench` recognise agentfs mounts among its
// targets and report what they did (blob requests, sync time).
func init() { benchMountProbe = controlProbe{} }

// controlProbe recognises agentfs mounts for `agentfs bench` through their
// control sockets.
type controlProbe struct{}

// Detect reports whether dir is inside a running agentfs mount.
func (controlProbe) Detect(dir string) (bench.Mount, bool) {
	c, err := findMount(context.Background(), dir)
	if err != nil {
		return nil, false
	}
	return benchMount{c}, true
}

// benchMount is a running mount as bench measures it.
type benchMount struct{ c *control.Client }

// Describe names the mount.
func (b benchMount) Describe() string {
	info, err := b.c.Info(context.Background())
	if err != nil {
		return "agentfs " + b.c.MountPoint()
	}
	return fmt.Sprintf("agentfs %s (branch %s)", info.URL, info.Branch)
}

// Stats returns the mount's cumulative counters.
func (b benchMount) Stats(ctx context.Context) (bench.MountStats, error) {
	s, err := b.c.Stats(ctx)
	if err != nil {
		return bench.MountStats{}, err
	}
	st, err := b.c.Status(ctx)
	if err != nil {
		return bench.MountStats{}, err
	}
	reqs := map[string]int64{}
	for _, o := range st.FUSE {
		reqs[o.Op] = o.Calls
	}
	return bench.MountStats{BlobPuts: s.BlobPuts, BlobGets: s.BlobGets, BytesUploaded: s.BytesUploaded,
		BytesDownloaded: s.BytesDownloaded, CacheHits: s.CacheHits, CacheMisses: s.CacheMisses, Requests: reqs}, nil
}

// Sync waits until everything written is in the store.
func (b benchMount) Sync(ctx context.Context) error { return b.c.Sync(ctx) }
