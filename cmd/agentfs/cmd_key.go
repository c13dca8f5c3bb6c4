package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/internal/volkey"
)

func init() { subcommands = append(subcommands, newKeyCmd) }

func newKeyCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "key",
		Short: "Change the key of an encrypted volume",
		Long: `Manage the key that locks an encrypted volume (agentfs init --encrypt).
The volume's data is encrypted under a random volume key, stored in
volume.json wrapped by your key; agentfs key rotate rewraps it.`,
	}
	c.AddCommand(newKeyRotateCmd())
	return c
}

func newKeyRotateCmd() *cobra.Command {
	var newKeyFile string
	c := &cobra.Command{
		Use:   "rotate URL",
		Short: "Lock an encrypted volume with a new key or passphrase",
		Long: `Lock the encrypted volume at URL with a new key or passphrase. It opens the
volume with the current one (--key-file, AGENTFS_KEY, AGENTFS_PASSPHRASE, or
typed when asked), then rewraps the volume key under the new one
(--new-key-file, AGENTFS_NEW_KEY, AGENTFS_NEW_PASSPHRASE, or typed twice when
asked) and rewrites volume.json: nothing else is rewritten, and the current
key no longer opens the volume. Mounts already running keep working; mount
again with the new key.

Rotation replaces a credential; it does not re-encrypt the data: whoever
could read the volume key before can still decrypt the volume.`,
		Example: `  AGENTFS_KEY=$(cat old.key) agentfs key rotate --new-key-file new.key s3://bucket/ws
  agentfs key rotate --key-file old.key file:///srv/ws   # new passphrase typed twice`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			repo, closeRepo, err := openVolumeRepo(cmd, args[0])
			if err != nil {
				return err
			}
			defer closeRepo()
			if !repo.Encrypted() {
				return fmt.Errorf("volume %s is not encrypted: there is no key to rotate (encryption is chosen at agentfs init --encrypt)", repo.URL())
			}
			src := volkey.Source{KeyFile: newKeyFile, FileFlag: "--new-key-file", KeyEnv: volkey.EnvNewKey, PassEnv: volkey.EnvNewPassphrase,
				Prompt: cmd.ErrOrStderr(), Label: "new passphrase of " + repo.URL(), Confirm: true}
			if volkey.IsTerminal(os.Stdin) {
				src.Terminal = os.Stdin
			}
			k, err := src.Get(true)
			if err != nil {
				return fmt.Errorf("rotate the key of %s: the new key: %w", repo.URL(), err)
			}
			if err := repo.RotateKey(ctx, k); err != nil {
				return err
			}
			what := "a key"
			if k.IsPassphrase() {
				what = "a passphrase"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "volume %s is now locked with %s; the old one no longer opens it\n", repo.URL(), what)
			return err
		},
	}
	c.Flags().StringVar(&newKeyFile, "new-key-file", "", "`FILE` holding the new key (else AGENTFS_NEW_KEY, AGENTFS_NEW_PASSPHRASE, or a passphrase typed twice)")
	return c
}
