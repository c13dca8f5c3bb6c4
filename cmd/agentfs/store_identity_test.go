package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/fstest"
)

// TestMissingStoreCreatesNothing: mount, snapshot list and fsck of a
// file:// URL whose directory does not exist fail with an error naming the
// URL and saying to run agentfs init, and do not create the directory.
// Only init creates a store.
func TestMissingStoreCreatesNothing(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "moved", "store")
	url := "file://" + dir
	check := func(what, out string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s of a missing store succeeded:\n%s", what, out)
		}
		if !strings.Contains(out, url) || !strings.Contains(out, "agentfs init "+url) {
			t.Errorf("%s of a missing store: want the URL and `agentfs init %s` in the error, got:\n%s", what, url, out)
		}
		if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s of a missing store created %s", what, filepath.Dir(dir))
		}
	}
	for _, args := range [][]string{{"snapshot", "list", url}, {"fsck", url}} {
		_, _, err := runCLI(t, time.Minute, args...)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		check(strings.Join(args[:len(args)-1], " "), msg, err)
	}

	bin := fstest.Binary(t)
	env := append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(base, "xdg-data"), "XDG_CACHE_HOME="+filepath.Join(base, "xdg-cache"))
	out, err := fstest.Run(bin, env, "mount", "-d", "--cache-dir", filepath.Join(base, "cache"), url, filepath.Join(base, "mnt"))
	check("mount", out, err)

	// init is the one command that creates it.
	if out, err := fstest.Run(bin, env, "init", url); err != nil {
		t.Fatalf("agentfs init %s: %v\n%s", url, err, out)
	}
	if _, _, err := runCLI(t, time.Minute, "snapshot", "list", url); err != nil {
		t.Errorf("snapshot list after init: %v", err)
	}
}
