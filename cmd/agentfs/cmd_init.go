package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/mountproc"
)

func init() { subcommands = append(subcommands, newInitCmd) }

func newInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init [URL]",
		Short: "Create a volume in a blob store",
		Long: `Create an agentfs volume at URL: the volume descriptor (volume.json) and
branch main, whose first commit is an empty root directory owned by you.
Without URL, the embedded default store in your data directory
($XDG_DATA_HOME/agentfs/default, or ~/.local/share/agentfs/default) is used;
` + "`agentfs mount`" + ` initializes that one on its own when needed.

It fails if URL already holds a volume.`,
		Example: `  agentfs init file:///var/lib/agentfs/vol
  agentfs init 's3://bucket/workspaces/task-42?region=eu-west-1'
  agentfs init 'gs://bucket/ws'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := ""
			if len(args) == 1 {
				url = args[0]
			} else {
				var err error
				if url, err = mountproc.DefaultStoreURL(); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			store, err := blobstore.Open(ctx, url, blobstore.Options{Create: true})
			if err != nil {
				return err
			}
			defer func() { _ = store.Close() }()
			created, err := mountproc.InitVolume(ctx, store)
			if err != nil {
				return fmt.Errorf("init %s: %w", store.URL(), err)
			}
			if !created {
				return fmt.Errorf("init %s: a volume already exists there (mount it with `agentfs mount %s MOUNTPOINT`)", store.URL(), store.URL())
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "initialized volume %s (branch main)\n", store.URL())
			return err
		},
	}
}
