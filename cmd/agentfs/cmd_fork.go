package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newForkCmd) }

func newForkCmd() *cobra.Command {
	var msg string
	c := &cobra.Command{
		Use:   "fork MOUNTPOINT|URL SRC NEWBRANCH",
		Short: "Create a branch that starts from a snapshot or a commit",
		Long: `Create branch NEWBRANCH whose first commit has the tree of SRC. It costs a few
small requests whatever the workspace's size: the data is shared, and each
branch stores only what its writer changes. Several forks of one snapshot can
be mounted at once, on one machine or several, each written independently.
On a MOUNTPOINT, the mount's server forks its own volume (with its
credentials); the mount itself is unchanged. To fork a mount's live state,
` + "`agentfs snapshot save MOUNTPOINT NAME`" + ` first and fork NAME.

` + refHelp,
		Example: `  agentfs fork file:///ws base attempt-1
  agentfs fork s3://bucket/ws main@12 before-the-bug
  agentfs mount --branch attempt-1 file:///ws /mnt/attempt-1`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			c, err := t.c.Fork(cmd.Context(), args[1], args[2], msg)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "forked %s (%v) to branch %s: %d files, %s\nmount it with `agentfs mount --branch %s %s MOUNTPOINT`\n",
				args[1], *c.Parent, args[2], c.Root.SubFiles, fmtSize(int64(c.Root.SubBytes)), args[2], t.URL())
			return err
		},
	}
	c.Flags().StringVarP(&msg, "message", "m", "", "the fork commit's message")
	return c
}
