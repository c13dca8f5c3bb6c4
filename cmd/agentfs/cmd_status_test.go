package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/cache"
	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/snapshot"
)

func TestWriteStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := control.Status{
		Info: control.Info{MountPoint: "/ws", PID: 42, URL: "s3://bucket/ws", Started: now.Add(-90 * time.Second)},
		Volume: cache.Status{Branch: "main", HeadSeq: 7, DirtyFiles: 2, DirtyBytes: 3 << 20, DirtyDirs: 1,
			CacheBytes: 5 << 30, CacheLimit: 10 << 30, CacheDir: "/c", LastCheckpoint: now.Add(-2 * time.Second),
			LastCheckpointDur: 15 * time.Millisecond, Commits: 3, Lease: &snapshot.Holder{ID: "w1", Host: "h", PID: 42}},
		Store: control.Stats{BlobPuts: 4, BytesUploaded: 2048, BlobGets: 1, BytesDownloaded: 10},
		FUSE:  []afs.OpStats{{Op: "lookup", Calls: 10}, {Op: "write", Calls: 30}},
		Refs:  &control.RefCounts{Branches: 3, Snapshots: 5},
		Retention: &control.Retention{Description: snapshot.DefaultRetention().String(),
			LastGC: &control.AutoGCRun{Time: now.Add(-10 * time.Minute), CommitsPruned: 700, PacksSwept: 3, BytesFreed: 5 << 20, Next: now.Add(50 * time.Minute)}},
	}
	var b bytes.Buffer
	if err := writeStatus(&b, st, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"mount:        /ws (server pid 42, up 1m30s)",
		"volume:       s3://bucket/ws branch main (read-write)",
		"head commit:  7 (last checkpoint 2s ago, took 15ms; commits by this mount: 3)",
		"waiting:      2 files (up to 3.0 MiB) and 1 directories to commit",
		"cache:        5.0 GiB of 10.0 GiB clean data in /c",
		"lease:        writer w1 on host h (pid 42)",
		"store:        4 PUTs (2.0 KiB up), 1 GETs (10 B down), 0 errors since mount",
		"requests:     40 since mount (write 30, lookup 10)",
		"history:      3 branches, 5 snapshots (agentfs branch list / snapshot list /ws)",
		"retention:    keep every commit of the last 1h; the newest per hour for 1d, per day for 1w (the default)",
		"gc:           last background gc 10m ago: 700 commits and 3 packs removed, 5.0 MiB freed; next in 50m",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	st.Volume.DirtyFiles, st.Volume.DirtyDirs, st.Info.ReadOnly = 0, 0, true
	b.Reset()
	if err := writeStatus(&b, st, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "nothing: everything is in the store") || !strings.Contains(b.String(), "lease:        none (read-only)") {
		t.Errorf("clean read-only status:\n%s", b.String())
	}
}

func TestStatusNotAMount(t *testing.T) {
	_, _, err := runCLI(t, time.Minute, "status", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not an agentfs mount") {
		t.Errorf("status of a plain directory: %v", err)
	}
}
