package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/internal/loopback"
)

// serveLoopback serves go-fuse's loopback of src on mnt with FUSE
// passthrough disabled (and otherwise the options of `agentfs loopback`:
// 1s entry and attribute timeouts, no negative caching), until SIGTERM or
// SIGINT (see loopback.Serve).
func serveLoopback(src, mnt string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sec, zero := time.Second, time.Duration(0)
	return loopback.Serve(ctx, src, mnt, &gofs.Options{
		MountOptions: fuse.MountOptions{
			FsName: src, Name: "loopback",
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		},
		AttrTimeout: &sec, EntryTimeout: &sec, NegativeTimeout: &zero,
	}, nil)
}
