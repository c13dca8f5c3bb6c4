package control

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/snapshottest"
)

// TestMetrics: the metrics page has the blob store's counters, the
// volume's state (its pinned files too), the FUSE counters and, for a
// volume, the branch and snapshot counts, with their current values.
func TestMetrics(t *testing.T) {
	ctx := context.Background()
	store, repo := snapshottest.InitVolume(t, fmt.Sprintf("mem://control-metrics-%d-%d", os.Getpid(), memSeq.Add(1)))
	w := snapshottest.OpenWorkspace(t, repo, "main")
	t.Cleanup(w.Close)
	c := serve(t, t.TempDir(), &volumeBackend{w: w}, store.Metrics())
	w.WriteFile("a.txt", []byte("one\n"))
	for _, name := range []string{"s1", "s2"} {
		if _, err := c.SaveSnapshot(ctx, name, ""); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	puts := store.Metrics().Snapshot(blobstore.OpPutIfAbsent).Calls
	for _, want := range []string{
		"agentfs_volume_branches 1\n",
		"agentfs_volume_snapshots 2\n",
		"agentfs_volume_dirty_files 3\n", // the fake status
		"agentfs_volume_head_seq 42\n",
		"agentfs_volume_pinned_files 2\n",
		"agentfs_volume_pinned_bytes 786432\n",
		`agentfs_fuse_requests_total{op="lookup"} 5` + "\n",
		`agentfs_fuse_errors_total{op="lookup"} 1` + "\n",
		fmt.Sprintf(`agentfs_blobstore_operations_total{op="put_if_absent"} %d`, puts),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("metrics page lacks %q:\n%s", want, page)
		}
	}
	if puts == 0 {
		t.Errorf("no conditional creates counted after two snapshots")
	}
}
