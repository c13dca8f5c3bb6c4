package mountd

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// TestWatchOwner: the context ends, with cause errOwnerExited, once the
// owner has exited (here before anyone reaps it); stop ends the watch and
// the context without that cause; a pid that names no process is an
// error.
func TestWatchOwner(t *testing.T) {
	sleep := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c
	}

	owner := sleep()
	ctx, stop, err := watchOwner(context.Background(), owner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case <-ctx.Done():
		t.Fatalf("ended while the owner runs: %v", context.Cause(ctx))
	case <-time.After(200 * time.Millisecond):
	}
	_ = owner.Process.Kill()
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), errOwnerExited) {
			t.Fatalf("cause %v, want errOwnerExited", context.Cause(ctx))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the context did not end 30 s after the owner was killed")
	}

	other := sleep()
	ctx, stop, err = watchOwner(context.Background(), other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if ctx.Err() == nil || errors.Is(context.Cause(ctx), errOwnerExited) {
		t.Fatalf("after stop: err %v cause %v", ctx.Err(), context.Cause(ctx))
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := watchOwner(context.Background(), gone.Process.Pid); err == nil {
		t.Fatalf("watching pid %d of a process that was reaped: no error", gone.Process.Pid)
	}
}
