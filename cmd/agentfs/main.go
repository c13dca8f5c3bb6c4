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
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit statuses of agentfs (listed in the root --help). `agentfs exec` and
// `agentfs run` pass their command's status through and add their own (see
// cmd_exec.go).
const (
	exitFailure = 1   // the command failed
	exitUsage   = 125 // bad usage: unknown command or flag, bad argument count or value
)

// exitError carries a process exit code out of a subcommand (for example the
// exit code of a command run by `agentfs exec`). Its message, if any, has
// already been printed.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError is a mistake in how agentfs was called: an unknown command or
// flag, a bad flag value, the wrong number of arguments. It exits with
// exitUsage, whatever the subcommand. Flag and argument-count errors become
// usageErrors in newRootCmd; subcommands return one from usageErrorf for
// their own checks of values.
type usageError struct {
	cmd string // the command path, for the hint
	err error
}

func (e *usageError) Error() string {
	return fmt.Sprintf("%v (see `%s --help`)", e.err, e.cmd)
}

func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a usageError of cmd.
func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf(format, args...)}
}

// exitStatus maps the error of a command to its exit status and the
// message to print on stderr ("" when there is none to print).
func exitStatus(err error) (int, string) {
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &ee):
		return ee.code, ""
	case errors.As(err, &ue):
		return exitUsage, "agentfs: " + err.Error()
	}
	return exitFailure, "agentfs: " + err.Error()
}

// asUsageErrors makes the flag and argument-count errors of c and its
// subcommands usageErrors.
func asUsageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &usageError{cmd: c.CommandPath(), err: err}
	})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(c *cobra.Command, a []string) error {
				if err := args(c, a); err != nil {
					return &usageError{cmd: c.CommandPath(), err: err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(c)
	// The root's unknown-command check (cobra's own, made while Args is
	// nil, is no usageError); a root that runs (shows its help) is needed
	// for cobra to call it.
	c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	c.Args = func(c *cobra.Command, a []string) error {
		if len(a) == 0 {
			return nil
		}
		hint := ""
		if s := c.SuggestionsFor(a[0]); len(s) > 0 {
			hint = "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return &usageError{cmd: c.CommandPath(), err: fmt.Errorf("unknown command %q%s", a[0], hint)}
	}
}

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
  mem://name                           in-memory, this process only (tests)

Exit status: 0 on success, 1 when the command failed, 125 for bad usage (an
unknown command or flag, a bad flag value, the wrong number of arguments).
` + "`agentfs exec`" + ` and ` + "`agentfs run`" + ` exit with their command's status (see their
--help).`,
		SilenceUsage:  true,
		SilenceErrors: true,

		SuggestionsMinimumDistance: 2,
	}
	for _, add := range subcommands {
		c := add()
		if keyCommands[c.Name()] {
			addKeyFlag(c)
		}
		root.AddCommand(c)
	}
	asUsageErrors(root)
	return root
}

// subcommands is filled by the init functions of the cmd_*.go files.
var subcommands []func() *cobra.Command

func main() {
	mayReexec = true
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	code, msg := exitStatus(err)
	if msg != "" {
		fmt.Fprintln(os.Stderr, msg)
	}
	os.Exit(code)
}
