package bench

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestStartLoopbackServerExitsEarly(t *testing.T) {
	// A "server" that prints a reason and exits before mounting.
	script := t.TempDir() + "/fake-agentfs"
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"no fuse here: $*\" >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop, err := StartLoopback(context.Background(), t.TempDir(), t.TempDir(), LoopbackOptions{Exe: script})
	if err == nil {
		t.Cleanup(func() { _ = stop() })
		t.Fatal("StartLoopback succeeded with a server that exits")
	}
	if !errors.Is(err, ErrLoopback) || !strings.Contains(err.Error(), "no fuse here: loopback ") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("error does not explain the failure: %v", err)
	}
}

func TestStartLoopbackTimesOut(t *testing.T) {
	// A "server" that never mounts: StartLoopback must give up, stop it,
	// and report both.
	script := t.TempDir() + "/slow-agentfs"
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := StartLoopback(context.Background(), t.TempDir(), t.TempDir(), LoopbackOptions{Exe: script, Timeout: 200e6})
	if !errors.Is(err, ErrLoopback) || !strings.Contains(err.Error(), "not mounted after") {
		t.Errorf("StartLoopback with a server that never mounts = %v", err)
	}
}

func TestStartLoopbackMissingBinary(t *testing.T) {
	_, err := StartLoopback(context.Background(), t.TempDir(), t.TempDir(), LoopbackOptions{Exe: "/nonexistent/agentfs"})
	if !errors.Is(err, ErrLoopback) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("StartLoopback with a missing binary = %v", err)
	}
}

func TestTailBuffer(t *testing.T) {
	b := &tailBuffer{max: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.String(); got != "defgh" {
		t.Errorf("tail = %q, want defgh", got)
	}
}
