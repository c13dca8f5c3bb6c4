package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/bench"
	"github.com/agentfs/agentfs/fs/fstest"
)

// TestBenchQuickOnMount: `agentfs bench --quick --json` with a plain
// directory and an agentfs mount as targets prints a well-formed report
// that recognises the mount and carries its counters for every workload:
// blob PUTs and bytes uploaded where the workload left data behind, and
// the time of the sync after each run.
func TestBenchQuickOnMount(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	plain := t.TempDir()
	out, stderr, err := runCLI(t, 5*time.Minute, "bench", plain, m.Dir, "--quick", "--json")
	if err != nil {
		t.Fatalf("agentfs bench: %v\n%s\nmount log:\n%s", err, stderr, m.Log())
	}
	var rep bench.Report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, out)
	}
	if len(rep.Targets) != 2 {
		t.Fatalf("targets: %+v", rep.Targets)
	}
	if rep.Targets[0].Agentfs != "" {
		t.Errorf("the plain directory is reported as an agentfs mount: %+v", rep.Targets[0])
	}
	if tg := rep.Targets[1]; !strings.HasPrefix(tg.Agentfs, "agentfs "+m.URL) || tg.FSType != "fuse.agentfs" {
		t.Errorf("the mount is not recognised: %+v (store %s)", tg, m.URL)
	}
	if len(rep.Failures) != 0 {
		t.Errorf("failures: %+v", rep.Failures)
	}
	results := map[string]int{}
	for _, r := range rep.Results {
		results[r.Workload+"/"+r.Phase+"@"+rep.Targets[r.Target].Dir]++
	}
	mounts := map[string]bench.MountResult{}
	for _, mr := range rep.Mounts {
		if mr.Target != 1 {
			t.Errorf("mount counters for target %d, which is no mount: %+v", mr.Target, mr)
			continue
		}
		mounts[mr.Workload] = mr
	}
	for _, w := range bench.Workloads() {
		for _, ph := range w.Phases {
			if k := w.Name + "/" + ph.Name + "@" + m.Dir; results[k] != 1 {
				t.Errorf("%d results for %s, want 1", results[k], k)
			}
		}
		mr, ok := mounts[w.Name]
		if !ok {
			t.Errorf("no mount counters for workload %s", w.Name)
			continue
		}
		if mr.Repeats != 1 || mr.SyncSeconds.N != 1 || mr.SyncSeconds.Median < 0 || mr.BlobPuts.Median < 0 || mr.MiBUploaded.Median < 0 {
			t.Errorf("mount counters of %s: %+v", w.Name, mr)
		}
	}
	// The big files stay in the volume until the workload's directory is
	// removed, so the sync after it uploads at least their data.
	p := bench.QuickParams()
	if mr := mounts["bigfile"]; mr.BlobPuts.Median < 1 || mr.MiBUploaded.Median*(1<<20) < float64(p.BigFileSize) {
		t.Errorf("bigfile wrote %d bytes per thread but the mount uploaded %.2f MiB in %.0f PUTs",
			p.BigFileSize, mr.MiBUploaded.Median, mr.BlobPuts.Median)
	}
}
