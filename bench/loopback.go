package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// LoopbackOptions tune StartLoopback. The zero value runs this program's
// own executable.
type LoopbackOptions struct {
	// Exe is the agentfs binary to run; empty means os.Executable().
	Exe string
	// Args are extra flags for `agentfs loopback` (for example
	// "--allow-other"); they go before SRC and MNT.
	Args []string
	// Env is added to this process's environment for the server.
	Env []string
	// Stderr, if not nil, receives the server's standard error as well.
	Stderr io.Writer
	// Timeout bounds the wait for the mount to appear; 0 means 10s.
	Timeout time.Duration
}

// ErrLoopback is matched (errors.Is) by errors of StartLoopback and of the
// stop function it returns.
var ErrLoopback = errors.New("loopback server")

// StartLoopback mounts go-fuse's loopback filesystem of src on mnt by
// running `agentfs loopback SRC MNT` as a separate process (never in this
// one: a process that serves a mount must not run commands inside it), and
// returns once the mount is live. ctx bounds only the start; the server
// runs until stop is called. stop asks the server to unmount (SIGTERM),
// waits for it, forces a lazy unmount and kills it if it does not exit
// within 10 seconds, and reports whether the mount is gone; it may be
// called more than once (later calls return the first result) and is
// meant for t.Cleanup or defer. The server is also sent SIGTERM if this
// process dies.
func StartLoopback(ctx context.Context, src, mnt string, opts LoopbackOptions) (stop func() error, err error) {
	exe := opts.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("%w: find the agentfs binary: %w", ErrLoopback, err)
		}
	}
	mnt, err = filepath.Abs(mnt)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoopback, err)
	}
	if mnt, err = filepath.EvalSymlinks(mnt); err != nil {
		return nil, fmt.Errorf("%w: mount point: %w", ErrLoopback, err)
	}
	if already, err := isFUSEMountPoint(mnt); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoopback, err)
	} else if already {
		return nil, fmt.Errorf("%w: %s is already a FUSE mount point", ErrLoopback, mnt)
	}
	args := append(append([]string{"loopback"}, opts.Args...), src, mnt)
	cmd := exec.Command(exe, args...)
	cmd.Dir = "/" // never inside a mount
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stdout = io.Discard
	tail := &tailBuffer{max: 8 << 10}
	cmd.Stderr = tail
	if opts.Stderr != nil {
		cmd.Stderr = io.MultiWriter(tail, opts.Stderr)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %w", ErrLoopback, exe, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() { stopErr = stopServer(cmd, exited, &waitErr, mnt, tail) })
		return stopErr
	}
	for {
		live, err := isFUSEMountPoint(mnt)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%w: %w", ErrLoopback, err), stop())
		}
		if live {
			return stop, nil
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("%w: %s exited before mounting %s: %w: %s", ErrLoopback, exe, mnt, waitErr, tail.String())
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("%w: waiting for %s: %w", ErrLoopback, mnt, ctx.Err()), stop())
		case <-deadline.C:
			return nil, errors.Join(fmt.Errorf("%w: %s not mounted after %s: %s", ErrLoopback, mnt, timeout, tail.String()), stop())
		case <-tick.C:
		}
	}
}

func stopServer(cmd *exec.Cmd, exited <-chan struct{}, waitErr *error, mnt string, tail *tailBuffer) error {
	var errs []error
	select {
	case <-exited:
		// Already gone: report how it ended unless the mount is gone too.
	default:
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("signal the server: %w", err))
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			errs = append(errs, fmt.Errorf("server did not exit within 10s of SIGTERM; unmounted lazily and killed it"))
			lazyUnmount(mnt)
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if *waitErr != nil {
		errs = append(errs, fmt.Errorf("server exited: %w: %s", *waitErr, tail.String()))
	}
	if live, err := isFUSEMountPoint(mnt); err != nil {
		errs = append(errs, err)
	} else if live {
		lazyUnmount(mnt)
		errs = append(errs, fmt.Errorf("%s was still mounted after the server exited; unmounted lazily", mnt))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w on %s: %w", ErrLoopback, mnt, errors.Join(errs...))
	}
	return nil
}

// lazyUnmount detaches mnt even if it is busy. Errors are ignored: the
// caller checks the mount table afterwards.
func lazyUnmount(mnt string) {
	_ = exec.Command("fusermount3", "-u", "-z", mnt).Run()
}

// tailBuffer keeps the last max bytes written to it. Safe for concurrent
// use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte // guarded by mu
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
