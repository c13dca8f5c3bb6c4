package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// serveLoopback serves go-fuse's loopback of src on mnt with FUSE
// passthrough disabled (and otherwise the options of `agentfs loopback`:
// 1s entry and attribute timeouts, no negative caching), until SIGTERM or
// SIGINT.
func serveLoopback(src, mnt string) error {
	root, err := gofs.NewLoopbackRoot(src)
	if err != nil {
		return err
	}
	sec, zero := time.Second, time.Duration(0)
	srv, err := gofs.Mount(mnt, root, &gofs.Options{
		MountOptions: fuse.MountOptions{
			FsName: src, Name: "loopback",
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		},
		AttrTimeout: &sec, EntryTimeout: &sec, NegativeTimeout: &zero,
	})
	if err != nil {
		return err
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		for range 50 {
			if srv.Unmount() == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	srv.Wait()
	return nil
}
