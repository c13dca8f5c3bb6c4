package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/mountproc"
	"github.com/agentfs/agentfs/serve/workspace"
	"github.com/agentfs/agentfs/snapshot"
)

// TestEncryptedStore: a manager over an encrypted volume needs its key
// (Config.Keys), and hands it to the mount servers of its workspaces,
// which get nothing from the test's environment, through their secrets
// pipe: their /proc/PID/environ (fixed at execve) never holds it.
func TestEncryptedStore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key := snapshot.UserKey{Key: []byte("workspace test key, 32 bytes or more")}
	url := "file://" + filepath.Join(t.TempDir(), "store")
	s, err := blobstore.Open(ctx, url, blobstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mountproc.InitVolume(ctx, s, &key); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	t.Setenv("AGENTFS_KEY", "")
	t.Setenv("AGENTFS_PASSPHRASE", "")
	cfg := e.config()
	cfg.StoreURL = url
	if m, err := workspace.Open(ctx, cfg); !errors.Is(err, snapshot.ErrKeyRequired) {
		if m != nil {
			_ = m.Close(ctx)
		}
		t.Fatalf("Open without the key: %v, want ErrKeyRequired", err)
	}
	cfg.Keys = func(bool) (snapshot.UserKey, error) { return key, nil }
	m := e.open(cfg)
	create(t, m, workspace.CreateRequest{Name: "w1"})
	h := acquire(t, m, "w1")
	writeFile(t, h, "a.txt", "sealed")
	if got := readFile(t, h, "a.txt"); got != "sealed" {
		t.Fatalf("read back %q", got)
	}
	if os.Getuid() == 0 { // the environ of an undumpable process: root only
		pids := e.serverPIDs()
		if len(pids) == 0 {
			t.Fatal("found no mount server")
		}
		for _, pid := range pids {
			environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(environ, key.Key) || bytes.Contains(environ, []byte("AGENTFS_KEY=")) {
				t.Errorf("the environ of mount server %d holds the volume's key", pid)
			}
		}
	}
	h.Release()
}
