package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/fs/fstest"
)

// TestMountMetrics: `agentfs mount --metrics ADDR` serves the mount's
// Prometheus metrics over TCP, with the writes made through the mount.
func TestMountMetrics(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	m := fstest.Start(t, fstest.Options{Args: []string{"--metrics", addr}})
	if err := os.WriteFile(filepath.Join(m.Dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := m.Agentfs("sync", m.Dir); err != nil {
		t.Fatalf("sync: %v\n%s", err, out)
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", addr))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v\n%s", resp.StatusCode, err, b)
	}
	page := string(b)
	for _, want := range []string{
		"agentfs_volume_branches 1\n",
		"agentfs_volume_snapshots 0\n",
		`agentfs_fuse_requests_total{op="create"} 1` + "\n",
		"agentfs_volume_dirty_files 0\n",
		`agentfs_blobstore_operations_total{op="put_if_absent"}`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("metrics lack %q:\n%s", want, page)
		}
	}
}
