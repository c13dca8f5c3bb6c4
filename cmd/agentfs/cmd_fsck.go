package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newFsckCmd) }

// fsckMaxPaths bounds the affected paths printed per problem (--json has
// them all).
const fsckMaxPaths = 20

func newFsckCmd() *cobra.Command {
	var full, jsonOut bool
	c := &cobra.Command{
		Use:   "fsck MOUNTPOINT|URL",
		Short: "Check that everything every commit and snapshot reaches exists and decodes",
		Long: `Check the volume: every commit and snapshot record decodes, every directory
tree and link table they reach exists, decodes and matches its hash, and every
pack they use exists and lists each referenced blob. With --full, every
referenced blob is also read and checked against its hash (each pack is read
once, whole).

Each problem is reported with the paths it makes unreadable and the commits
and snapshots (BRANCH@SEQ, snapshot NAME) they belong to. fsck runs safely
while volumes are mounted; it exits with status 1 when it finds a problem.
On a MOUNTPOINT, the mount's server checks its volume (with its credentials).`,
		Example: `  agentfs fsck file:///ws
  agentfs fsck s3://bucket/ws --full --json > fsck.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			prog, clear := progressLine(cmd, "fsck")
			rep, err := t.c.Fsck(cmd.Context(), full, prog)
			clear()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				if rep.Problems == nil {
					rep.Problems = []snapshot.Problem{}
				}
				if err := writeJSON(out, rep); err != nil {
					return err
				}
			} else {
				ew := &errWriter{w: out}
				for _, p := range rep.Problems {
					ew.printf("%s: %s\n", p.Object, p.Message)
					for i, a := range p.Affected {
						if i == fsckMaxPaths {
							ew.printf("  ... and %d more paths (--json lists them all)\n", len(p.Affected)-i)
							break
						}
						from := a.From
						more := ""
						if len(from) > 5 {
							from, more = from[:5], fmt.Sprintf(" and %d more", len(a.From)-5)
						}
						ew.printf("  %s  (in %s%s)\n", a.Path, strings.Join(from, ", "), more)
					}
				}
				mode := "structure"
				if rep.Full {
					mode = fmt.Sprintf("structure and %s of data", fmtSize(rep.BytesVerified))
				}
				ew.printf("checked %s: %d branches, %d commits, %d snapshots; %d trees, %d blobs in %d packs (%d unreferenced) in %s\n",
					mode, rep.Branches, rep.Commits, rep.Snapshots, rep.Trees, rep.Blobs, rep.Packs, rep.PacksUnreferenced, rep.Duration.Round(time.Millisecond))
				if rep.OK() {
					ew.println("no problems found")
				} else {
					ew.printf("%d problems found\n", len(rep.Problems))
				}
				if ew.Err() != nil {
					return ew.Err()
				}
			}
			if !rep.OK() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&full, "full", false, "also read every referenced blob and check its hash")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the report as JSON")
	return c
}
