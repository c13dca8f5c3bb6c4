package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/fs/fstest"
)

// TestKeyNotInMountServerEnviron: an encrypted volume whose key is in the
// caller's AGENTFS_KEY mounts with `agentfs mount -d` and with `agentfs
// run`, and the /proc/PID/environ of their mount servers holds neither the
// key nor its variable: the key reached them through their secrets pipe.
// What that file shows is fixed at the server's execve, so reading it once
// the mount is ready shows what any process of the user could have read
// in the moments before the server made itself undumpable.
func TestKeyNotInMountServerEnviron(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("reads the environ of an undumpable process: needs root (internal/mountproc's TestStartPassesSecretsByPipe covers this without)")
	}
	checkEnviron := func(what, environ string) {
		t.Helper()
		if environ == "" {
			t.Fatalf("%s: read no environ", what)
		}
		if strings.Contains(environ, fstest.TestKey) || strings.Contains(environ, "AGENTFS_KEY=") {
			t.Errorf("%s: the mount server's environ holds the volume's key", what)
		}
	}

	m := fstest.Start(t, fstest.Options{Encrypted: true})
	if err := os.WriteFile(filepath.Join(m.Dir, "f"), []byte("sealed"), 0o644); err != nil {
		t.Fatal(err)
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(m.PID) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	checkEnviron("mount -d", string(environ))
	m.Unmount(t)

	// agentfs run: the command finds its mount's server by the mount point
	// in its argv and copies that server's environ out of the mount.
	out := filepath.Join(t.TempDir(), "environ")
	script := `for c in /proc/[0-9]*/cmdline; do
	  if tr '\0' '\n' < "$c" 2>/dev/null | grep -qxF -- "$PWD"; then cat "${c%/cmdline}/environ" > "$OUT"; fi
	done; cat f`
	res, err := fstest.Run(m.Bin, append(m.Env, "OUT="+out), "run", m.URL, "--", "sh", "-c", script)
	if err != nil || !strings.Contains(res, "sealed") {
		t.Fatalf("agentfs run on the encrypted volume: %v\n%s", err, res)
	}
	environ, err = os.ReadFile(out)
	if err != nil {
		t.Fatalf("the command found no mount server: %v\n%s", err, res)
	}
	checkEnviron("run", string(environ))
}
