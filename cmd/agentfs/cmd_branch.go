package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newBranchCmd) }

func newBranchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "branch",
		Short: "List and remove the branches of a volume",
		Long: `A branch is a numbered line of commits; one writer at a time holds it (its
lease). ` + "`agentfs fork`" + ` creates branches; a writer that loses a commit race moves
its changes to a new branch BRANCH-conflict-TIME.`,
	}
	c.AddCommand(newBranchListCmd(), newBranchRmCmd())
	return c
}

// branchJSON is a branch in `branch list --json`.
type branchJSON struct {
	Name     string           `json:"name"`
	HeadSeq  uint64           `json:"head_seq"`
	HeadTime time.Time        `json:"head_time"`
	Kind     string           `json:"kind"`
	Message  string           `json:"message,omitempty"`
	Files    uint64           `json:"files"`
	Bytes    uint64           `json:"bytes"`
	Writer   *snapshot.Holder `json:"writer,omitempty"` // the live lease's holder
	Expires  *time.Time       `json:"lease_expires,omitempty"`
}

func newBranchListCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "list MOUNTPOINT|URL",
		Short: "List branches with their head commit and live writer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			list, err := t.c.Branches(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				js := make([]branchJSON, 0, len(list))
				for _, b := range list {
					j := branchJSON{Name: b.Name, HeadSeq: b.Head.ID.Seq, HeadTime: b.Head.Time, Kind: b.Head.Kind, Message: b.Head.Message,
						Files: b.Head.Root.SubFiles, Bytes: b.Head.Root.SubBytes}
					if b.Lease != nil && b.Lease.Live {
						h, exp := b.Lease.Holder, b.Lease.Expires
						j.Writer, j.Expires = &h, &exp
					}
					js = append(js, j)
				}
				return writeJSON(out, js)
			}
			tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
			ew := &errWriter{w: tw}
			ew.println("BRANCH\tHEAD\tTIME\tKIND\tFILES\tSIZE\tWRITER")
			for _, b := range list {
				writer := "-"
				if b.Lease != nil && b.Lease.Live {
					writer = b.Lease.Holder.String()
				}
				head := "-"
				if b.Head.ID.Seq > 0 {
					head = fmt.Sprint(b.Head.ID.Seq)
				}
				ew.printf("%s\t%s\t%s\t%s\t%d\t%s\t%s\n", b.Name, head, fmtTime(b.Head.Time), b.Head.Kind,
					b.Head.Root.SubFiles, fmtSize(int64(b.Head.Root.SubBytes)), writer)
			}
			if ew.Err() != nil {
				return ew.Err()
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return c
}

func newBranchRmCmd() *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "rm MOUNTPOINT|URL BRANCH",
		Short: "Remove a branch and its commits",
		Long: `Remove a branch: its commits and its head. Snapshots taken of it stay
readable; the data only it used is freed by the next ` + "`agentfs gc`" + `.

It refuses the default branch (main) and a branch that a live writer holds
(the writer is named) unless --force is given; a writer still running would
bring the branch back with its next commit, so stop it first.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			n, err := t.deleteBranch(cmd.Context(), args[1], force)
			if err != nil {
				return fmt.Errorf("%w (--force overrides)", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "removed branch %s (%d commits); run `agentfs gc %s` to free the space only it used\n", args[1], n, t.Ref())
			return err
		},
	}
	c.Flags().BoolVar(&force, "force", false, "remove the default branch or a branch held by a live writer")
	return c
}
