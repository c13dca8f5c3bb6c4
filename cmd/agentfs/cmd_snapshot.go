package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newSnapshotCmd) }

const refHelp = `A reference (SRC, A, B) is a snapshot name, a branch (its newest commit) or
BRANCH@SEQ (commit SEQ of that branch); write snapshot:NAME or branch:NAME
when a name is both.`

func newSnapshotCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "snapshot",
		Short: "Save, list, compare, restore and remove named snapshots of a volume",
		Long: `A snapshot is a name for one commit of a volume: saving one costs a few small
requests whatever the workspace's size, and it keeps its tree readable for as
long as it exists (gc never removes what a snapshot reaches, even after the
commit it was taken of is pruned).

The first argument is the volume: its store URL, or a MOUNTPOINT (any path in
an agentfs mount), whose server then does the work with its own credentials.
On a MOUNTPOINT, ` + "`snapshot save`" + ` commits everything written before it first,
` + "`snapshot restore`" + ` changes the live mount in place, and ` + "`snapshot diff`" + ` can compare
with "live", the mount's current state.

` + refHelp,
	}
	c.AddCommand(newSnapshotSaveCmd(), newSnapshotListCmd(), newSnapshotRmCmd(), newSnapshotDiffCmd(), newSnapshotRestoreCmd())
	return c
}

func newSnapshotSaveCmd() *cobra.Command {
	var msg, branch string
	c := &cobra.Command{
		Use:   "save MOUNTPOINT|URL NAME",
		Short: "Save a mount's state, or the head of a branch, as snapshot NAME",
		Long: `On a MOUNTPOINT, commit everything written to the mount before the command and
save that commit as snapshot NAME: a consistent point, whatever is written
afterwards. On a URL, save the newest commit of a branch (default main).

Names are 1 to 100 letters, digits, '.', '_' and '-', not starting with '.'
or '-'; a name that exists is an error (remove it first with
` + "`agentfs snapshot rm`" + `).`,
		Example: `  agentfs snapshot save ./workspace before-refactor -m "tests green"
  agentfs snapshot save file:///var/lib/agentfs/ws base
  agentfs snapshot save s3://bucket/ws base --branch attempt-3`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			s, err := t.saveSnapshot(cmd.Context(), args[1], msg, branch)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "saved snapshot %s of %v: %d files, %s\n", s.Name, s.Commit, s.Files(), fmtSize(int64(s.Bytes())))
			return err
		},
	}
	c.Flags().StringVarP(&msg, "message", "m", "", "a message recorded with the snapshot")
	c.Flags().StringVar(&branch, "branch", "", "URL form: the branch whose head to save (default main)")
	return c
}

// snapshotJSON is a snapshot in `snapshot list --json`.
type snapshotJSON struct {
	Name        string    `json:"name"`
	Time        time.Time `json:"time"`
	Commit      string    `json:"commit"`
	Branch      string    `json:"branch"`
	Seq         uint64    `json:"seq"`
	CommitTime  time.Time `json:"commit_time"`
	Files       uint64    `json:"files"`
	Bytes       uint64    `json:"bytes"`
	UniqueBytes *int64    `json:"unique_bytes,omitempty"`
	Kind        string    `json:"kind"`
	Message     string    `json:"message,omitempty"`
	Host        string    `json:"host,omitempty"`
}

func newSnapshotListCmd() *cobra.Command {
	var jsonOut, noUnique bool
	c := &cobra.Command{
		Use:   "list MOUNTPOINT|URL",
		Short: "List the snapshots of a volume",
		Long: `List every snapshot: name, time, the commit it was taken of, its files and
logical size, and the bytes unique to it — stored bytes that no other
snapshot and no commit reaches, i.e. what removing it (and a gc) makes
unreferenced. Computing them reads every commit and every distinct directory
tree of the volume once (no file data); --no-unique skips that.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			prog, clear := progressLine(cmd, "sizing snapshots")
			list, err := t.c.ListSnapshotsProgress(cmd.Context(), !noUnique, prog)
			clear()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				js := make([]snapshotJSON, 0, len(list))
				for _, s := range list {
					j := snapshotJSON{Name: s.Name, Time: s.Time, Commit: s.Commit.String(), Branch: s.Commit.Branch, Seq: s.Commit.Seq,
						CommitTime: s.CommitTime, Files: s.Files(), Bytes: s.Bytes(), Kind: s.Kind, Message: s.Message, Host: s.Host}
					if s.UniqueBytes >= 0 {
						u := s.UniqueBytes
						j.UniqueBytes = &u
					}
					js = append(js, j)
				}
				return writeJSON(out, js)
			}
			if len(list) == 0 {
				_, err := fmt.Fprintln(out, "no snapshots")
				return err
			}
			tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
			ew := &errWriter{w: tw}
			ew.println("NAME\tSAVED\tCOMMIT\tFILES\tSIZE\tUNIQUE\tKIND\tMESSAGE")
			for _, s := range list {
				unique := "-"
				if s.UniqueBytes >= 0 {
					unique = fmtSize(s.UniqueBytes)
				}
				ew.printf("%s\t%s\t%v\t%d\t%s\t%s\t%s\t%s\n", s.Name, fmtTime(s.Time), s.Commit, s.Files(), fmtSize(int64(s.Bytes())),
					unique, s.Kind, oneLine(s.Message))
			}
			if ew.Err() != nil {
				return ew.Err()
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	c.Flags().BoolVar(&noUnique, "no-unique", false, "do not compute the bytes unique to each snapshot (no tree is read)")
	return c
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newSnapshotRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm MOUNTPOINT|URL NAME...",
		Short: "Remove snapshots",
		Long: `Remove the named snapshots. Their data stays until ` + "`agentfs gc`" + ` finds it
referenced by no other snapshot and no retained commit.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			var errs []error
			ew := &errWriter{w: cmd.OutOrStdout()}
			for _, name := range args[1:] {
				if err := t.c.DeleteSnapshot(cmd.Context(), name); err != nil {
					errs = append(errs, err)
					continue
				}
				ew.printf("removed snapshot %s\n", name)
			}
			if len(errs) == 0 {
				ew.printf("run `agentfs gc %s` to free the space only they used\n", t.Ref())
			}
			return errors.Join(append(errs, ew.Err())...)
		},
	}
}

func newSnapshotDiffCmd() *cobra.Command {
	var stat, patch, jsonOut bool
	var maxBytes int64 = 4 << 20
	c := &cobra.Command{
		Use:   "diff MOUNTPOINT|URL A B",
		Short: "Show what changed from A to B",
		Long: `List the paths added (A), modified (M) and deleted (D) from A to B, with their
sizes; a modification says what changed (content, type, mode, owner, xattrs,
target, rdev). A path that changed between a directory and something else is
one modification (type), followed by what was below the old directory
(deleted) or is below the new one (added). Directories whose trees are equal
are skipped without being read, so the cost follows the size of the change,
not of the workspace.

--stat prints one line per changed file and a summary; -p adds a unified
content diff for text files (binary files and files over --max-bytes are
named, not shown); --json prints the changes as JSON.

` + refHelp + ` On a MOUNTPOINT, A or B may also be "live": the
mount's current state (everything written before the command is committed
first, and the diff is computed by the mount's server).`,
		Example: `  agentfs snapshot diff ./workspace base live
  agentfs snapshot diff file:///ws main@3 main@4 -p
  agentfs snapshot diff s3://bucket/ws base attempt-2 --stat`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			t, err := openTarget(ctx, args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			out := cmd.OutOrStdout()
			var sum histdiff.Summary
			changes := []histdiff.Change{}
			req := control.DiffRequest{A: args[1], B: args[2], Patch: patch && !jsonOut && !stat, MaxBytes: maxBytes}
			res, err := t.c.Diff(ctx, req, func(c histdiff.Change) error {
				sum.Add(c)
				switch {
				case jsonOut:
					changes = append(changes, c)
					return nil
				case stat:
					if c.DirOnly() {
						return nil
					}
					_, err := fmt.Fprintln(out, c.StatLine())
					return err
				}
				if _, err := fmt.Fprintln(out, c.Line()); err != nil {
					return err
				}
				_, err := io.WriteString(out, c.Patch)
				return err
			})
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(out, struct {
					A       string            `json:"a"`
					B       string            `json:"b"`
					Changes []histdiff.Change `json:"changes"`
					Summary histdiff.Summary  `json:"summary"`
				}{res.AName, res.BName, changes, sum})
			}
			if stat {
				_, err = fmt.Fprintln(out, sum)
			}
			return err
		},
	}
	c.Flags().BoolVar(&stat, "stat", false, "one line per changed file and a summary")
	c.Flags().BoolVarP(&patch, "patch", "p", false, "show unified content diffs of text files")
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	c.Flags().Var(byteCountFlag{&maxBytes}, "max-bytes", "largest file whose content -p shows")
	return c
}

// byteCountFlag is a pflag.Value for a byte count with an optional binary
// unit (K, M, G).
type byteCountFlag struct{ p *int64 }

func (f byteCountFlag) String() string { return fmtSize(*f.p) }

func (f byteCountFlag) Set(s string) error {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	var v int64
	if _, err := fmt.Sscan(t, &v); err != nil || v < 0 {
		return fmt.Errorf("invalid size %q (examples: 512K, 4M)", s)
	}
	*f.p = v * mult
	return nil
}

func (byteCountFlag) Type() string { return "size" }

func newSnapshotRestoreCmd() *cobra.Command {
	var branch, msg string
	c := &cobra.Command{
		Use:   "restore MOUNTPOINT|URL NAME",
		Short: "Make a live mount, or a branch, the state of a snapshot (or any reference)",
		Long: `Make the workspace the tree of NAME. The state before the restore is saved
first as an automatic snapshot (auto-pre-restore-BRANCH-TIME), so a restore
never loses anything: restore that snapshot to undo it.

On a MOUNTPOINT, the live mount is restored in place: everything written
before is committed (and is what the automatic snapshot keeps), the mount's
files become NAME's at once, and the change is the branch's new head. Open
files keep the data they had open.

On a URL, a new commit is written on a branch (default main) whose tree is
that of NAME. This form is for a branch that is not mounted read-write: it
refuses while a writer holds the branch's lease, and names that writer (name
its MOUNTPOINT instead).

` + refHelp,
		Example: `  agentfs snapshot restore ./workspace before-refactor
  agentfs snapshot restore file:///ws before-refactor
  agentfs snapshot restore s3://bucket/ws main@12 --branch main`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			res, err := t.restore(cmd.Context(), args[1], branch, msg)
			var held *snapshot.LeaseHeldError
			if errors.As(err, &held) {
				return fmt.Errorf("restore %s: %w (unmount it first, or name its MOUNTPOINT to restore it live)", cmp.Or(branch, snapshot.DefaultBranch), err)
			}
			if err != nil {
				return err
			}
			ew := &errWriter{w: cmd.OutOrStdout()}
			what := "branch " + res.Commit.ID.Branch
			if t.mount != nil {
				what = t.info.MountPoint
			}
			ew.printf("restored %s to %s: new head %v (%d files, %s)\n", what, args[1], res.Commit.ID,
				res.Commit.Root.SubFiles, fmtSize(int64(res.Commit.Root.SubBytes)))
			if res.Saved != nil {
				undo := fmt.Sprintf("agentfs snapshot restore %s %s", t.Ref(), res.Saved.Name)
				if t.mount == nil {
					undo += " --branch " + res.Commit.ID.Branch
				}
				ew.printf("the previous state (%v) is snapshot %s; undo with `%s`\n", res.Saved.Commit, res.Saved.Name, undo)
			}
			return ew.Err()
		},
	}
	c.Flags().StringVar(&branch, "branch", "", "URL form: the branch to restore (default main)")
	c.Flags().StringVarP(&msg, "message", "m", "", "the restore commit's message")
	return c
}
