package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newVolumeCmd) }

func newVolumeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "volume",
		Short: "Describe or delete a whole volume",
		Long: `Describe a volume (agentfs volume info) or delete it with everything it holds
(agentfs volume rm). The Go API is snapshot.Repo.Info and snapshot.RemoveVolume.`,
	}
	c.AddCommand(newVolumeInfoCmd(), newVolumeRmCmd())
	return c
}

func newVolumeInfoCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "info URL",
		Short: "Show a volume's format, parameters, size, branches, snapshots and writers",
		Long: `Show the volume at URL: its format and parameters (hash, chunking,
compression, pack size, encryption), its size and object count by kind, its
retention policy and last gc, its branches with their heads and writer leases,
and its snapshots. It lists every object of the volume once. --json prints
snapshot.VolumeInfo.`,
		Example: `  agentfs volume info s3://bucket/ws
  agentfs volume info --json file:///srv/ws | jq .bytes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			repo, closeRepo, err := openVolumeRepo(cmd, args[0])
			if err != nil {
				return err
			}
			defer closeRepo()
			now := time.Now()
			info, err := repo.Info(ctx, now)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), info)
			}
			return writeVolumeInfo(cmd.OutOrStdout(), info, now)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return c
}

// writeVolumeInfo prints info for people.
func writeVolumeInfo(w io.Writer, info snapshot.VolumeInfo, now time.Time) error {
	ew := &errWriter{w: w}
	cfg := info.Config
	ew.printf("volume:      %s\n", info.URL)
	ew.printf("id:          %s (format %d, created %s)\n", cfg.VolumeID, cfg.Format, fmtTime(cfg.Created))
	ew.printf("parameters:  %s hashes, %s %s chunks, %s, %s packs\n", cfg.Hash, cfg.Chunking, fmtSize(int64(cfg.ChunkSize)), cfg.Compression, fmtSize(int64(cfg.PackSize)))
	ew.printf("encryption:  %s%s\n", cfg.Encryption, describeKey(cfg.Key))
	var kinds []string
	for _, k := range info.Kinds {
		kinds = append(kinds, fmt.Sprintf("%s %d (%s)", k.Kind, k.Objects, fmtSize(k.Bytes)))
	}
	ew.printf("size:        %s in %d objects: %s\n", fmtSize(info.Bytes), info.Objects, strings.Join(kinds, ", "))
	if info.Foreign > 0 {
		ew.printf("             (and %d objects under the URL that are not the volume's)\n", info.Foreign)
	}
	ret := info.Retention.String()
	if !info.RetentionStored {
		ret += " (the default)"
	}
	ew.printf("retention:   %s\n", ret)
	last := "never"
	if !info.LastGC.IsZero() {
		last = fmtTime(info.LastGC)
	}
	ew.printf("last gc:     %s\n", last)
	ew.printf("branches:    %d\n", len(info.Branches))
	for _, b := range info.Branches {
		line := fmt.Sprintf("  %s: head %d", b.Name, b.Head.ID.Seq)
		if !b.Head.Time.IsZero() {
			line += fmt.Sprintf(" (%s, %s)", b.Head.Kind, fmtTime(b.Head.Time))
		}
		switch l := b.Lease; {
		case l == nil:
		case l.Live:
			line += fmt.Sprintf("; held by %s until %s", l.Holder, fmtTime(l.Expires))
		default:
			line += fmt.Sprintf("; last writer %s, expired %s ago", l.Holder, now.Sub(l.Expires).Round(time.Second))
		}
		ew.printf("%s\n", line)
	}
	ew.printf("snapshots:   %d", len(info.Snapshots))
	if len(info.Snapshots) > 0 {
		shown := info.Snapshots[:min(len(info.Snapshots), 10)]
		ew.printf(" (%s", strings.Join(shown, ", "))
		if len(info.Snapshots) > len(shown) {
			ew.printf(", …; agentfs snapshot list %s", info.URL)
		}
		ew.printf(")")
	}
	ew.printf("\n")
	return ew.Err()
}

func newVolumeRmCmd() *cobra.Command {
	var force, yes bool
	c := &cobra.Command{
		Use:   "rm URL",
		Short: "Delete a volume and everything it holds",
		Long: `Delete every object of the volume at URL: its data, commits, branches,
snapshots, leases and volume.json (objects under the URL that are not the
volume's are left alone). This cannot be undone.

It refuses while a writer holds a live lease on one of the volume's branches
(unmount it first; a writer killed without unmounting holds it for up to 30 s),
unless --force, which also finishes a removal that was interrupted. A forced
removal under a live writer makes that writer fail at its next commit.

On a terminal it shows what it will delete and asks for confirmation; when
stdin is not a terminal it refuses unless --yes. It shows its progress on a
terminal.`,
		Example: `  agentfs volume rm s3://bucket/old-ws
  agentfs volume rm --yes file:///srv/scratch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := openVolumeStore(ctx, args[0])
			if err != nil {
				return err
			}
			defer func() { _ = store.Close() }()
			keys := volumeKeys(cmd) // asks at most once
			what, err := describeRemoval(ctx, store, force, keys)
			if err != nil {
				return err
			}
			if !yes {
				if err := confirm(cmd, what); err != nil {
					return err
				}
			}
			prog, clear := progressLine(cmd, "volume rm")
			rep, err := snapshot.RemoveVolume(ctx, store, snapshot.RemoveOptions{Force: force, Keys: keys, Progress: prog})
			clear()
			if err != nil {
				return err
			}
			ew := &errWriter{w: cmd.OutOrStdout()}
			ew.printf("removed the volume at %s: %d objects, %s\n", store.URL(), rep.Objects, fmtSize(rep.Bytes))
			if rep.Foreign > 0 {
				ew.printf("left alone: %d objects under the URL that are not the volume's\n", rep.Foreign)
			}
			return ew.Err()
		},
	}
	c.Flags().BoolVar(&force, "force", false, "remove it although a writer holds a lease, or finish an interrupted removal")
	c.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return c
}

// describeRemoval says what removing the volume at store deletes, for the
// confirmation. It refuses early (before asking) what RemoveVolume would
// refuse: a live writer without force.
func describeRemoval(ctx context.Context, store *blobstore.Store, force bool, keys snapshot.KeySource) (string, error) {
	repo, err := snapshot.OpenWithKey(ctx, store, keys)
	var keyErr *snapshot.KeyError
	if errors.As(err, &keyErr) && force {
		return fmt.Sprintf("the encrypted volume at %s (not listed: no key to read it)", store.URL()), nil
	}
	if errors.Is(err, snapshot.ErrNoVolume) && force {
		return fmt.Sprintf("what is left of a volume at %s", store.URL()), nil
	}
	if err != nil {
		return "", err
	}
	defer repo.Close()
	if !force {
		if err := repo.CheckNoWriter(ctx, time.Now()); err != nil {
			return "", err
		}
	}
	info, err := repo.Info(ctx, time.Now())
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("volume %s at %s: %d objects, %s; %d branches, %d snapshots",
		info.Config.VolumeID, store.URL(), info.Objects, fmtSize(info.Bytes), len(info.Branches), len(info.Snapshots)), nil
}

// confirm asks on a terminal whether to delete what; without a terminal
// on stdin it refuses.
func confirm(cmd *cobra.Command, what string) error {
	in, ok := cmd.InOrStdin().(*os.File)
	if !ok || !isTerminal(in) {
		return fmt.Errorf("stdin is not a terminal to confirm on: pass --yes to delete %s", what)
	}
	_, _ = fmt.Fprintf(cmd.ErrOrStderr(), "This deletes %s.\nIt cannot be undone. Type yes to go on: ", what)
	line, _ := bufio.NewReader(in).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return fmt.Errorf("not confirmed: nothing was deleted")
	}
	return nil
}

// openVolumeStore opens the store a volume command names: a URL (these
// commands work on whole volumes, not on mounts).
func openVolumeStore(ctx context.Context, arg string) (*blobstore.Store, error) {
	if !isStoreURL(arg) {
		return nil, fmt.Errorf("%q is not a store URL (file:///path, s3://bucket/prefix, gs://bucket/prefix): "+
			"agentfs volume takes the volume's URL (agentfs status MOUNTPOINT shows a mount's)", arg)
	}
	return blobstore.Open(ctx, arg, blobstore.Options{})
}

// openVolumeRepo opens the volume at the URL arg with the command's key
// (volumeKeys), for the commands that work on a whole volume. close closes
// the volume, then its store.
func openVolumeRepo(cmd *cobra.Command, arg string) (repo *snapshot.Repo, close func(), err error) {
	ctx := cmd.Context()
	store, err := openVolumeStore(ctx, arg)
	if err != nil {
		return nil, nil, err
	}
	repo, err = snapshot.OpenWithKey(ctx, store, volumeKeys(cmd))
	if err != nil {
		_ = store.Close()
		return nil, nil, err
	}
	return repo, func() {
		repo.Close()
		_ = store.Close()
	}, nil
}

// describeKey says how an encrypted volume's key is derived ("" for none).
func describeKey(k *snapshot.KeyWrap) string {
	switch {
	case k == nil:
		return ""
	case k.KDF == "argon2id":
		return fmt.Sprintf(", locked with a passphrase (argon2id: %d passes, %s, %d lanes)", k.Time, fmtSize(int64(k.MemoryKiB)<<10), k.Threads)
	}
	return ", locked with a key (" + k.KDF + ")"
}
