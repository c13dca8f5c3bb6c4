// Package loopback serves go-fuse's loopback filesystem, the baseline
// every agentfs performance target is a ratio against. Serve is the one
// server loop behind `agentfs loopback` (which bench.StartLoopback runs)
// and behind the loopbacks the perf programs under fs/internal serve from
// a child process of their own.
//
// It imports no agentfs package, so programs of any layer may use it. It
// mounts in the calling process: that process must never run workloads or
// commands inside the mount it serves.
package loopback

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Serve mounts go-fuse's loopback filesystem of the directory src on mnt,
// with opts passed to go-fuse's fs.Mount unchanged, and serves it until ctx
// is done (callers pass a context that SIGTERM and SIGINT cancel). It then
// unmounts mnt, retrying every 100 ms for five seconds while the mount is
// busy; if it is still busy after that, Serve detaches it lazily
// (fusermount3 -u -z) and returns an error.
//
// mounted, when not nil, is called once the mount is live, before Serve
// waits. Serve returns nil only after unmounting mnt itself; it returns an
// error without mounting when src cannot be opened or mnt cannot be
// mounted, and an error when mnt is unmounted by someone else before ctx
// is done.
func Serve(ctx context.Context, src, mnt string, opts *fs.Options, mounted func()) error {
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return fmt.Errorf("loopback: source %s: %w", src, err)
	}
	server, err := fs.Mount(mnt, root, opts)
	if err != nil {
		return fmt.Errorf("loopback: mount %s on %s: %w (is fuse3 installed and /dev/fuse usable? see scripts/setup-fuse.sh)", src, mnt, err)
	}
	if mounted != nil {
		mounted()
	}
	done := make(chan struct{})
	go func() {
		server.Wait()
		close(done)
	}()
	select {
	case <-done:
		return fmt.Errorf("loopback: %s was unmounted from outside", mnt)
	case <-ctx.Done():
	}
	return unmount(server, mnt, done)
}

// unmount unmounts mnt, retrying while it is busy for up to five seconds,
// then detaches it lazily and reports the failure. done is closed when
// server stops serving.
func unmount(server *fuse.Server, mnt string, done <-chan struct{}) error {
	var err error
	for range 50 {
		if err = server.Unmount(); err == nil {
			<-done
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	lerr := exec.Command("fusermount3", "-u", "-z", mnt).Run()
	return errors.Join(fmt.Errorf("loopback: unmount %s (busy for 5s; detached lazily): %w", mnt, err), lerr)
}
