package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/fs/control"
)

func init() { subcommands = append(subcommands, newDiscardCmd) }

func newDiscardCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "discard MOUNTPOINT [PATHS...]",
		Short: "Drop a virtual mount's changes",
		Long: `Drop the changes of the virtual mount at MOUNTPOINT: all of them, or those at
PATHS and below (a renamed entry is dropped when PATHS name its new or its old
path). The mount shows the base at those paths again at once, without a
remount; the other changes stay pending. The base itself is not touched.

Dropped changes are gone from the workspace; earlier states of it remain in
its branch's history (` + "`agentfs branch list`" + `) until gc prunes them.

PATHS are relative to the mount's root, or paths inside the mount.`,
		Example: `  agentfs discard ./ws                  # everything
  agentfs discard ./ws build/ notes.txt`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, paths, err := findWorkspace(ctx, args)
			if err != nil {
				return err
			}
			rep, err := cl.Discard(ctx, control.DiscardRequest{Paths: paths})
			if err != nil {
				return fmt.Errorf("discard %s: %w", cl.MountPoint(), err)
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(out, rep)
			}
			if len(rep.Discarded) == 0 {
				_, err = fmt.Fprintf(out, "nothing to discard%s\n", pendingNote(rep.Pending))
				return err
			}
			if _, err := fmt.Fprintf(out, "discarded %s:\n", plural(len(rep.Discarded), "change")); err != nil {
				return err
			}
			for _, c := range rep.Discarded {
				if _, err := fmt.Fprintln(out, "  "+virtualChangeLine(c)); err != nil {
					return err
				}
			}
			if rep.Pending > 0 {
				_, err = fmt.Fprintf(out, "%s still pending (agentfs diff %s)\n", plural(rep.Pending, "change"), cl.MountPoint())
			}
			return err
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}
