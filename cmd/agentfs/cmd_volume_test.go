package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/internal/snapshottest"
	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/snapshot"
)

// runCLIStdin runs the CLI in-process with stdin read from in (not a
// terminal).
func runCLIStdin(t *testing.T, in string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(in))
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestVolumeCLI: volume info and volume rm on file://, MinIO and the GCS
// emulator.
func TestVolumeCLI(t *testing.T) {
	for _, kind := range []string{"file", "minio", "gcs"} {
		t.Run(kind, func(t *testing.T) {
			var url string
			switch kind {
			case "file":
				url = "file://" + t.TempDir()
			case "minio":
				url = testservices.StartMinIO(t)
			case "gcs":
				url = testservices.StartGCSEmulator(t) + "/ws"
			}
			_, repo := snapshottest.InitVolume(t, url)
			w := snapshottest.OpenWorkspace(t, repo, "main")
			w.WriteFile("a.txt", []byte("hello\n"))
			w.Close()
			ctx := context.Background()
			if _, err := repo.SaveSnapshot(ctx, "base", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{}); err != nil {
				t.Fatal(err)
			}

			out := mustCLI(t, "volume", "info", url)
			for _, want := range []string{"id:          " + repo.Config().VolumeID + " (format 1,", "encryption:  none\n",
				"parameters:  sha256 hashes, fixed 64.0 KiB chunks, zstd, 16.0 MiB packs\n", "branches:    1\n  main: head 2 (",
				"snapshots:   1 (base)\n", "retention:   keep every commit of the last 1h", "last gc:     never\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("info lacks %q:\n%s", want, out)
				}
			}
			var info snapshot.VolumeInfo
			if err := json.Unmarshal([]byte(mustCLI(t, "volume", "info", "--json", url)), &info); err != nil {
				t.Fatal(err)
			}
			if info.Objects == 0 || info.Bytes == 0 || len(info.Branches) != 1 || info.Config.VolumeID != repo.Config().VolumeID {
				t.Errorf("info --json: %+v", info)
			}

			// A live writer: refused, even with --yes.
			l, err := repo.AcquireLease(ctx, "main", snapshot.Holder{ID: "w1", Host: "box", PID: 7}, time.Minute, time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := runCLIStdin(t, "", "volume", "rm", "--yes", url); !errors.Is(err, snapshot.ErrLeaseHeld) || !strings.Contains(err.Error(), "host box (pid 7") {
				t.Fatalf("rm under a live writer: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// Without a terminal and without --yes: refused.
			if _, _, err := runCLIStdin(t, "yes\n", "volume", "rm", url); err == nil || !strings.Contains(err.Error(), "--yes") {
				t.Fatalf("rm without --yes: %v", err)
			}
			if _, err := snapshot.Open(ctx, repo.Store()); err != nil {
				t.Fatalf("the volume went without confirmation: %v", err)
			}
			out, _, err = runCLIStdin(t, "", "volume", "rm", "--yes", url)
			if err != nil || !strings.Contains(out, "removed the volume at ") || !strings.Contains(out, "objects") {
				t.Fatalf("rm --yes: %v\n%s", err, out)
			}
			if _, err := snapshot.Open(ctx, repo.Store()); !errors.Is(err, snapshot.ErrNoVolume) {
				t.Fatalf("open after rm: %v", err)
			}
			if _, _, err := runCLI(t, time.Minute, "volume", "info", url); !errors.Is(err, snapshot.ErrNoVolume) {
				t.Errorf("info after rm: %v", err)
			}
		})
	}
	if _, _, err := runCLI(t, time.Minute, "volume", "info", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a store URL") {
		t.Errorf("info of a path: %v", err)
	}
}

// openPTY returns the two ends of a new pseudo-terminal; the follower is a
// terminal for isTerminal.
func openPTY(t *testing.T) (leader, follower *os.File) {
	t.Helper()
	leader, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { _ = leader.Close() })
	if err := unix.IoctlSetPointerInt(int(leader.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(leader.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	follower, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = follower.Close() })
	return leader, follower
}

// TestVolumeRmConfirms: on a terminal, rm asks and deletes only after
// "yes".
func TestVolumeRmConfirms(t *testing.T) {
	url := "file://" + t.TempDir()
	_, repo := snapshottest.InitVolume(t, url)
	for _, answer := range []string{"no", "yes"} {
		leader, follower := openPTY(t)
		if _, err := leader.WriteString(answer + "\n"); err != nil {
			t.Fatal(err)
		}
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetIn(follower)
		root.SetArgs([]string{"volume", "rm", url})
		err := root.ExecuteContext(context.Background())
		if !strings.Contains(errOut.String(), "This deletes volume "+repo.Config().VolumeID) || !strings.Contains(errOut.String(), "Type yes to go on") {
			t.Errorf("%s: prompt: %q", answer, errOut.String())
		}
		_, oerr := snapshot.Open(context.Background(), repo.Store())
		switch answer {
		case "no":
			if err == nil || !strings.Contains(err.Error(), "not confirmed") || oerr != nil {
				t.Fatalf("answered no: %v; open: %v", err, oerr)
			}
		case "yes":
			if err != nil || !errors.Is(oerr, snapshot.ErrNoVolume) {
				t.Fatalf("answered yes: %v; open: %v", err, oerr)
			}
		}
	}
}
