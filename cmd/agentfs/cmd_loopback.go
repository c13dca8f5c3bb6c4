package main

import (
	"fmt"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/internal/loopback"
)

func init() { subcommands = append(subcommands, newLoopbackCmd) }

func newLoopbackCmd() *cobra.Command {
	var (
		allowOther                bool
		debug                     bool
		attrTTL, entryTTL, negTTL time.Duration
	)
	c := &cobra.Command{
		Use:   "loopback SRC MNT",
		Short: "Serve go-fuse's loopback filesystem of SRC on MNT (the benchmark baseline)",
		Long: `Serve go-fuse's loopback filesystem of SRC on MNT, in the foreground, until
SIGTERM or SIGINT, then unmount.

Every agentfs performance target is a ratio against this: the same kernel FUSE
path as an agentfs mount, over the same local disk, with no cache or blob store
behind it. Run benchmarks from another process (for example agentfs bench MNT);
never from this one. bench.StartLoopback runs this command as a child process.

If MNT is busy at shutdown, it is unmounted lazily and the command fails.`,
		Example: `  agentfs loopback /var/tmp/src /var/tmp/mnt &
  agentfs bench /var/tmp/plain /var/tmp/mnt
  kill %1`,
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, mnt := args[0], args[1]
			opts := &fs.Options{
				MountOptions: fuse.MountOptions{
					AllowOther: allowOther,
					Debug:      debug,
					FsName:     src,
					Name:       "loopback",
				},
				AttrTimeout:     &attrTTL,
				EntryTimeout:    &entryTTL,
				NegativeTimeout: &negTTL,
			}
			return loopback.Serve(cmd.Context(), src, mnt, opts, func() {
				_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "agentfs loopback: serving %s on %s\n", src, mnt) // informational
			})
		},
	}
	f := c.Flags()
	f.BoolVar(&allowOther, "allow-other", false, "let other users (and containers) use the mount (allow_other)")
	f.BoolVar(&debug, "debug", false, "log every FUSE request to stderr")
	f.DurationVar(&attrTTL, "attr-timeout", time.Second, "how long the kernel caches attributes")
	f.DurationVar(&entryTTL, "entry-timeout", time.Second, "how long the kernel caches name lookups")
	f.DurationVar(&negTTL, "negative-timeout", 0, "how long the kernel caches failed lookups")
	return c
}
