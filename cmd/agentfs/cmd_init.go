package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/mountproc"
	"github.com/agentfs/agentfs/internal/volkey"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newInitCmd) }

func newInitCmd() *cobra.Command {
	var encrypt bool
	c := &cobra.Command{
		Use:   "init [URL]",
		Short: "Create a volume in a blob store",
		Long: `Create an agentfs volume at URL: the volume descriptor (volume.json) and
branch main, whose first commit is an empty root directory owned by you.
Without URL, the embedded default store in your data directory
($XDG_DATA_HOME/agentfs/default, or ~/.local/share/agentfs/default) is used;
` + "`agentfs mount`" + ` initializes that one on its own when needed.

It fails if URL already holds a volume.

With --encrypt, every object of the volume is encrypted and authenticated on
this machine before it reaches the store (see FORMAT.md, "Encryption at
rest"). The volume is locked with a key — --key-file FILE, or AGENTFS_KEY:
at least 32 bytes, e.g. from ` + "`openssl rand -base64 32`" + ` — or with a
passphrase: AGENTFS_PASSPHRASE, or typed twice when asked on a terminal.
Every command that opens the volume then needs the same key or passphrase
(` + "`agentfs key rotate`" + ` changes it). Lose it and the volume is lost.`,
		Example: `  agentfs init file:///var/lib/agentfs/vol
  agentfs init 's3://bucket/workspaces/task-42?region=eu-west-1'
  agentfs init 'gs://bucket/ws'
  openssl rand -base64 32 > ~/.agentfs-key && agentfs init --encrypt --key-file ~/.agentfs-key s3://bucket/ws`,
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
			var key *snapshot.UserKey
			if encrypt {
				src := volkey.Default(keyFile(cmd))
				src.Label, src.Confirm = "passphrase for the new volume "+store.URL(), true
				k, err := src.Get(true)
				if err != nil {
					return fmt.Errorf("init --encrypt %s: %w", store.URL(), err)
				}
				key = &k
			}
			created, err := mountproc.InitVolume(ctx, store, key)
			if err != nil {
				return fmt.Errorf("init %s: %w", store.URL(), err)
			}
			if !created {
				return fmt.Errorf("init %s: a volume already exists there (mount it with `agentfs mount %s MOUNTPOINT`)", store.URL(), store.URL())
			}
			enc := ""
			if encrypt {
				enc = ", encrypted"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "initialized volume %s (branch main%s)\n", store.URL(), enc)
			return err
		},
	}
	c.Flags().BoolVar(&encrypt, "encrypt", false, "encrypt the volume (with --key-file, AGENTFS_KEY, AGENTFS_PASSPHRASE or a passphrase typed twice)")
	return addKeyFlag(c)
}
