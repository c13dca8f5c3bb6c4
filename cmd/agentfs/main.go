// Command agentfs mounts, inspects and benchmarks agentfs workspaces: FUSE
// filesystems whose truth lives in blob storage (S3, GCS or a local
// directory). Each subcommand lives in its own cmd_*.go file; this file only
// assembles them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code out of a subcommand (for example the
// exit code of a command run by `agentfs exec`). Its message, if any, has
// already been printed.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "agentfs",
		Short: "A workspace filesystem for AI agents, backed by blob storage",
		Long: `agentfs gives an AI agent (or a person) a workspace directory whose truth lives
in blob storage (S3, GCS or a local directory), with a local metadata and data
cache for local-disk speed, O(1) snapshots and forks, and a copy-on-write
virtual mode. Commands run inside the mounted workspace, on the host or in
Docker containers.

Store URLs:
  file:///abs/path                     a directory on this machine
  s3://bucket/prefix?endpoint=URL&region=R&path_style=true
  gs://bucket/prefix                   (STORAGE_EMULATOR_HOST selects an emulator)
  mem://name                           in-memory, this process only (tests)`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	return root
}

// subcommands is filled by the init functions of the cmd_*.go files.
var subcommands []func() *cobra.Command

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err == nil {
		return
	}
	var ee *exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	fmt.Fprintln(os.Stderr, "agentfs:", err)
	os.Exit(1)
}
