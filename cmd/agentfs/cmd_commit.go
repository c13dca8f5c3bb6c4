package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/overlay"
)

func init() { subcommands = append(subcommands, newCommitCmd) }

func newCommitCmd() *cobra.Command {
	var req control.CommitRequest
	var jsonOut bool
	c := &cobra.Command{
		Use:   "commit MOUNTPOINT [PATHS...]",
		Short: "Accept a virtual mount's changes into its base",
		Long: `Accept the changes of the virtual mount at MOUNTPOINT (all of them, or those
at PATHS and below) into its base; the rest stay pending in the workspace.

Over a snapshot or a branch, the changes become a new commit on the base's
branch (named with --snapshot if given), and the workspace's base moves to it.
If the branch changed the same paths since the workspace's base, nothing is
committed unless --force (the workspace's version wins).

Over a host directory, the changes are written to the directory: each file
atomically (its new bytes staged in the directory, then renamed over the old
path), deletions and renames applied, and the list of what was written is
printed. The committed paths then read through to the host directory again.
A change to a path that the host itself changed since the workspace was
created or last committed is refused, naming the paths, unless --force (the
workspace's version wins); discard such changes to see the host's version.
Hard links are written as separate files.

A path inside a directory that is new or renamed in the workspace commits only
with that directory; over a host directory, a partial commit that would change
what a pending change still reads (a pending rename's source, the file of a hard
link made in the workspace) is refused too. The error names what to add.

PATHS are relative to the mount's root, or paths inside the mount.`,
		Example: `  agentfs commit ./ws -m "fix the parser"
  agentfs commit ./ws src/parser.go src/lexer.go
  agentfs commit ./ws --snapshot attempt-3-ok
  agentfs commit ./ws --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, paths, err := findWorkspace(ctx, args)
			if err != nil {
				return err
			}
			req.Paths = paths
			res, err := cl.Commit(ctx, req)
			if errors.Is(err, overlay.ErrConflict) {
				return fmt.Errorf("commit %s: %w\n(see the changes with `agentfs diff %s`; --force commits them anyway)", cl.MountPoint(), err, cl.MountPoint())
			}
			if err != nil {
				return fmt.Errorf("commit %s: %w", cl.MountPoint(), err)
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(out, res)
			}
			info, err := cl.Info(ctx)
			if err != nil {
				return err
			}
			if len(res.Changes) == 0 {
				_, err = fmt.Fprintf(out, "nothing to commit%s\n", pendingNote(res.Pending))
				return err
			}
			switch {
			case res.Commit != nil && req.Snapshot != "":
				_, err = fmt.Fprintf(out, "committed %s to %v (snapshot %s):\n", plural(len(res.Changes), "change"), *res.Commit, req.Snapshot)
			case res.Commit != nil:
				_, err = fmt.Fprintf(out, "committed %s to %v:\n", plural(len(res.Changes), "change"), *res.Commit)
			default:
				where := "the base directory"
				if info.Virtual != nil && info.Virtual.HostDir != "" {
					where = info.Virtual.HostDir
				}
				_, err = fmt.Fprintf(out, "wrote %s to %s:\n", plural(len(res.Changes), "change"), where)
			}
			if err != nil {
				return err
			}
			for _, c := range res.Changes {
				if _, err := fmt.Fprintln(out, "  "+virtualChangeLine(c)); err != nil {
					return err
				}
			}
			if res.Pending > 0 {
				_, err = fmt.Fprintf(out, "%s still pending (agentfs diff %s)\n", plural(res.Pending, "change"), cl.MountPoint())
			}
			return err
		},
	}
	fl := c.Flags()
	fl.StringVarP(&req.Message, "message", "m", "", "the commit's message")
	fl.StringVar(&req.Snapshot, "snapshot", "", "also save the new commit as snapshot `NAME` (snapshot and branch bases)")
	fl.BoolVar(&req.Force, "force", false, "commit even where the base (its branch, or the host directory) changed the same paths")
	fl.BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

// pendingNote says how many changes are left, if any.
func pendingNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" at those paths (%s pending elsewhere)", plural(n, "change"))
}

// plural formats a count and a noun.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
