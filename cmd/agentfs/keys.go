package main

// The key of an encrypted volume, for every command that opens one.

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/internal/volkey"
	"github.com/agentfs/agentfs/snapshot"
)

// keyFileFlag is the flag naming the key file of an encrypted volume.
const keyFileFlag = "key-file"

const keyFileUsage = "`FILE` holding the key of an encrypted volume (else AGENTFS_KEY, AGENTFS_PASSPHRASE, or a passphrase typed when asked)"

// addKeyFlag gives c and its subcommands the --key-file flag.
func addKeyFlag(c *cobra.Command) *cobra.Command {
	c.PersistentFlags().String(keyFileFlag, "", keyFileUsage)
	return c
}

// keyFile returns the --key-file of cmd ("" if none or not a flag of cmd).
func keyFile(cmd *cobra.Command) string {
	f := cmd.Flag(keyFileFlag)
	if f == nil {
		return ""
	}
	return f.Value.String()
}

// volumeKeys returns where cmd finds the key of an encrypted volume:
// --key-file, AGENTFS_KEY, AGENTFS_PASSPHRASE, then a prompt on a terminal.
// The first key found is kept: a command that opens the volume twice asks
// once.
func volumeKeys(cmd *cobra.Command) snapshot.KeySource {
	return keepFirst(volkey.Default(keyFile(cmd)).Keys())
}

// daemonKeys is volumeKeys for a process that runs other people's
// commands (agentfs serve, whose local backend starts them from its own
// environment): it reads AGENTFS_KEY and AGENTFS_PASSPHRASE now and removes
// them from the environment, so that no command it starts inherits the
// volume's key.
func daemonKeys(cmd *cobra.Command) (snapshot.KeySource, error) {
	env := map[string]string{}
	for _, name := range []string{volkey.EnvKey, volkey.EnvPassphrase} {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
			if err := os.Unsetenv(name); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	src := volkey.Default(keyFile(cmd))
	src.Getenv = func(name string) string { return env[name] }
	return keepFirst(src.Keys()), nil
}

// keepFirst returns src remembering the first key it gives.
func keepFirst(src snapshot.KeySource) snapshot.KeySource {
	var got *snapshot.UserKey
	return func(passphrase bool) (snapshot.UserKey, error) {
		if got != nil {
			return *got, nil
		}
		k, err := src(passphrase)
		if err == nil {
			got = &k
		}
		return k, err
	}
}

// keyCommands are the top-level commands that open a volume by URL and
// take --key-file (mount has its own flag).
var keyCommands = map[string]bool{
	"snapshot": true, "branch": true, "fork": true, "fsck": true, "gc": true,
	"retention": true, "volume": true, "serve": true, "key": true,
}
