package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/fs/control"
)

func init() { subcommands = append(subcommands, newGCCmd) }

func newGCCmd() *cobra.Command {
	var (
		dryRun, jsonOut bool
		rf              retentionFlags
		grace           time.Duration
	)
	c := &cobra.Command{
		Use:   "gc MOUNTPOINT|URL",
		Short: "Delete old commits and the data nothing references any more",
		Long: `Remove what no retained commit, branch or snapshot reaches:

  1. retention: the commits the volume's retention policy does not keep are
     removed (see below; agentfs retention show URL|MOUNTPOINT prints it).
     Rules given here replace the volume's policy for this run. Whatever
     the rules, each branch's newest commit is kept, and so is any commit
     superseded less than an hour ago, for readers still on it;
  2. packs of data that no kept commit and no snapshot references, and that
     are older than the grace period (1 hour), are deleted. Younger packs may
     be the uploads of a writer that has not committed yet.

gc runs safely while volumes are mounted and writing; a read-write mount
applies the policy by itself, about hourly (agentfs retention --help). Packs
that still hold some live data are kept whole; the report shows their dead
bytes. --dry-run computes everything, deletes nothing, and lists the commits
it would remove and the bytes it would free.

On a MOUNTPOINT, the mount's server runs the gc on its volume (with its
credentials, in its process: its memory grows for the duration).

` + retentionHelp,
		Example: `  agentfs gc file:///ws --dry-run
  agentfs gc s3://bucket/ws --keep-last 50 --keep-within 7d
  agentfs gc ./workspace --keep-all        # only the garbage of crashed uploads`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			policy, err := rf.policy(cmd.Flags())
			if err != nil {
				return err
			}
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			prog, clear := progressLine(cmd, "gc")
			rep, err := t.c.GC(cmd.Context(), control.GCRequest{Policy: policy, DryRun: dryRun, Grace: grace}, prog)
			clear()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(out, rep)
			}
			ew := &errWriter{w: out}
			verb, freed := "deleted", "freed"
			if rep.DryRun {
				verb, freed = "would delete", "would be freed"
				ew.println("dry run: nothing was deleted")
			}
			ew.printf("policy: %s (%d branches, %d snapshots)\n", rep.Policy, rep.Branches, rep.Snapshots)
			ew.printf("commits: %d kept, %s %d\n", rep.CommitsKept, verb, rep.CommitsPruned)
			if rep.DryRun {
				for _, b := range slices.Sorted(maps.Keys(rep.Pruned)) {
					ew.printf("  %s: %s\n", b, seqRanges(rep.Pruned[b]))
				}
			}
			ew.printf("packs: %d of %s total; %d live, %d too young to delete, %s %d (%s %s)\n",
				rep.PacksTotal, fmtSize(rep.BytesTotal), rep.PacksLive, rep.PacksYoung, verb, rep.PacksSwept, fmtSize(rep.BytesFreed), freed)
			if rep.PartialPacks > 0 {
				ew.printf("partly live packs: %d, holding %s of dead data (kept whole)\n", rep.PartialPacks, fmtSize(rep.DeadBytes))
			}
			if rep.NewCommits+rep.NewSnapshots > 0 {
				ew.printf("written during gc and kept: %d commits, %d snapshots\n", rep.NewCommits, rep.NewSnapshots)
			}
			if rep.MissingPacks > 0 || rep.PackErrors > 0 {
				ew.printf("warning: %d referenced packs are missing, %d pack operations failed: run `agentfs fsck %s`\n", rep.MissingPacks, rep.PackErrors, t.Ref())
			}
			ew.printf("marked %d trees and %d blobs in %s\n", rep.TreesRead, rep.BlobsMarked, rep.Duration.Round(time.Millisecond))
			return ew.Err()
		},
	}
	f := c.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "report what would be deleted, delete nothing")
	rf.add(f)
	f.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	f.Var(ageFlag{&grace}, "grace", "override the grace period (tests only: it must exceed every writer's longest checkpoint)")
	_ = f.MarkHidden("grace")
	return c
}

// seqRanges writes increasing commit numbers as ranges: "1-4, 7, 9-12".
func seqRanges(seqs []uint64) string {
	var parts []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(seqs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", seqs[i], seqs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
