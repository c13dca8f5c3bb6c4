package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/internal/udiff"
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

The first argument is the volume's store URL. On a volume that is mounted,
` + "`agentfs sync MOUNTPOINT`" + ` first makes everything written so far part of the branch
head that ` + "`snapshot save`" + ` records.

` + refHelp,
	}
	c.AddCommand(newSnapshotSaveCmd(), newSnapshotListCmd(), newSnapshotRmCmd(), newSnapshotDiffCmd(), newSnapshotRestoreCmd())
	return c
}

func newSnapshotSaveCmd() *cobra.Command {
	var msg, branch string
	c := &cobra.Command{
		Use:   "save URL NAME",
		Short: "Save the head of a branch as snapshot NAME",
		Long: `Save the newest commit of a branch (default main) as snapshot NAME. Names are
1 to 100 letters, digits, '.', '_' and '-', not starting with '.' or '-'; a
name that exists is an error (remove it first with ` + "`agentfs snapshot rm`" + `).`,
		Example: `  agentfs snapshot save file:///var/lib/agentfs/ws before-refactor -m "tests green"
  agentfs snapshot save s3://bucket/ws base --branch attempt-3`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer t.close()
			s, err := t.repo.SaveSnapshot(cmd.Context(), args[1], snapshot.CommitID{Branch: branch}, snapshot.SaveOptions{Message: msg})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "saved snapshot %s of %v: %d files, %s\n", s.Name, s.Commit, s.Files(), fmtSize(int64(s.Bytes())))
			return err
		},
	}
	c.Flags().StringVarP(&msg, "message", "m", "", "a message recorded with the snapshot")
	c.Flags().StringVar(&branch, "branch", snapshot.DefaultBranch, "the branch whose head to save")
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
		Use:   "list URL",
		Short: "List the snapshots of a volume",
		Long: `List every snapshot: name, time, the commit it was taken of, its files and
logical size, and the bytes unique to it — stored bytes that no other
snapshot and no commit reaches, i.e. what removing it (and a gc) makes
unreferenced. Computing them reads every commit and every distinct directory
tree of the volume once (no file data); --no-unique skips that.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer t.close()
			prog, clear := progressLine(cmd, "sizing snapshots")
			list, err := t.repo.ListSnapshots(cmd.Context(), snapshot.ListOptions{Unique: !noUnique, Progress: prog})
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
		Use:   "rm URL NAME...",
		Short: "Remove snapshots",
		Long: `Remove the named snapshots. Their data stays until ` + "`agentfs gc`" + ` finds it
referenced by no other snapshot and no retained commit.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer t.close()
			var errs []error
			ew := &errWriter{w: cmd.OutOrStdout()}
			for _, name := range args[1:] {
				if err := t.repo.DeleteSnapshot(cmd.Context(), name); err != nil {
					errs = append(errs, err)
					continue
				}
				ew.printf("removed snapshot %s\n", name)
			}
			if len(errs) == 0 {
				ew.printf("run `agentfs gc %s` to free the space only they used\n", t.URL())
			}
			return errors.Join(append(errs, ew.Err())...)
		},
	}
}

// changeJSON is one change in `snapshot diff --json`.
type changeJSON struct {
	Op      string `json:"op"` // added, modified, deleted
	Path    string `json:"path"`
	Type    string `json:"type"`
	OldType string `json:"old_type,omitempty"`
	OldSize uint64 `json:"old_size"`
	NewSize uint64 `json:"new_size"`
	What    string `json:"what,omitempty"` // modified: content,type,mode,owner,xattrs,target,rdev
}

// diffSummary counts a diff's non-directory changes.
type diffSummary struct {
	Added    int   `json:"added"`
	Modified int   `json:"modified"`
	Deleted  int   `json:"deleted"`
	Grown    int64 `json:"bytes_added"`   // sum of size increases
	Shrunk   int64 `json:"bytes_removed"` // sum of size decreases
}

func (s *diffSummary) add(c snapshot.Change) {
	if c.Entry().Type == snapshot.TypeDir {
		return
	}
	switch c.Op {
	case snapshot.Added:
		s.Added++
	case snapshot.Modified:
		s.Modified++
	case snapshot.Deleted:
		s.Deleted++
	}
	before, after := c.Sizes()
	if after > before {
		s.Grown += int64(after - before)
	} else {
		s.Shrunk += int64(before - after)
	}
}

func (s diffSummary) String() string {
	return fmt.Sprintf("%d added, %d modified, %d deleted (+%s, -%s)", s.Added, s.Modified, s.Deleted, fmtSize(s.Grown), fmtSize(s.Shrunk))
}

func newSnapshotDiffCmd() *cobra.Command {
	var stat, patch, jsonOut bool
	var maxBytes int64 = 4 << 20
	c := &cobra.Command{
		Use:   "diff URL A B",
		Short: "Show what changed from A to B",
		Long: `List the paths added (A), modified (M) and deleted (D) from A to B, with their
sizes; a modification says what changed (content, type, mode, owner, xattrs,
target, rdev). Directories whose trees are equal are skipped without being
read, so the cost follows the size of the change, not of the workspace.

--stat prints one line per changed file and a summary; -p adds a unified
content diff for text files (binary files and files over --max-bytes are
named, not shown); --json prints the changes as JSON.

` + refHelp + ` A and B may not be "live" yet (that needs a MOUNTPOINT).`,
		Example: `  agentfs snapshot diff file:///ws base main
  agentfs snapshot diff file:///ws main@3 main@4 -p
  agentfs snapshot diff s3://bucket/ws base attempt-2 --stat`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			for _, ref := range args[1:] {
				if ref == "live" {
					return fmt.Errorf(`"live" compares with a mount's unsaved state and needs a MOUNTPOINT, which this command does not take yet: run ` + "`agentfs sync MOUNTPOINT`" + ` and compare with the branch instead`)
				}
			}
			t, err := openTarget(ctx, args[0])
			if err != nil {
				return err
			}
			defer t.close()
			a, err := t.repo.Resolve(ctx, args[1])
			if err != nil {
				return err
			}
			b, err := t.repo.Resolve(ctx, args[2])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var sum diffSummary
			var changes []changeJSON
			err = t.repo.Diff(ctx, a.Tree, b.Tree, func(c snapshot.Change) error {
				sum.add(c)
				switch {
				case jsonOut:
					cj := changeJSON{Op: c.Op.String(), Path: c.Path, Type: c.Entry().Type.String()}
					cj.OldSize, cj.NewSize = c.Sizes()
					if c.Op == snapshot.Modified {
						cj.What = c.What.String()
						if c.Old.Type != c.New.Type {
							cj.OldType = c.Old.Type.String()
						}
					}
					changes = append(changes, cj)
					return nil
				case stat:
					if c.Entry().Type == snapshot.TypeDir {
						return nil
					}
					before, after := c.Sizes()
					_, err := fmt.Fprintf(out, " %c %s | %s -> %s\n", c.Op, c.Path, fmtSize(int64(before)), fmtSize(int64(after)))
					return err
				}
				if _, err := fmt.Fprintln(out, changeLine(c)); err != nil {
					return err
				}
				if patch {
					return writePatch(cmd, t.repo, c, maxBytes)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if jsonOut {
				if changes == nil {
					changes = []changeJSON{}
				}
				return writeJSON(out, struct {
					A       string       `json:"a"`
					B       string       `json:"b"`
					Changes []changeJSON `json:"changes"`
					Summary diffSummary  `json:"summary"`
				}{a.String(), b.String(), changes, sum})
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

// changeLine is the default one-line form of a change.
func changeLine(c snapshot.Change) string {
	p := c.Path
	if c.Entry().Type == snapshot.TypeDir && p != "." {
		p += "/"
	}
	before, after := c.Sizes()
	switch c.Op {
	case snapshot.Added:
		if c.New.Type == snapshot.TypeDir {
			return "A  " + p
		}
		return fmt.Sprintf("A  %s  (%s)", p, fmtSize(int64(after)))
	case snapshot.Deleted:
		if c.Old.Type == snapshot.TypeDir {
			return "D  " + p
		}
		return fmt.Sprintf("D  %s  (%s)", p, fmtSize(int64(before)))
	}
	s := fmt.Sprintf("M  %s  [%s]", p, c.What)
	if c.What&snapshot.ChangedContent != 0 {
		s += fmt.Sprintf("  %s -> %s", fmtSize(int64(before)), fmtSize(int64(after)))
	}
	if c.What&snapshot.ChangedMode != 0 {
		s += fmt.Sprintf("  mode %04o -> %04o", c.Old.Mode, c.New.Mode)
	}
	if c.What&snapshot.ChangedTarget != 0 {
		s += fmt.Sprintf("  -> %s (was %s)", c.New.Target, c.Old.Target)
	}
	return s
}

// writePatch writes the unified content diff of a file change.
func writePatch(cmd *cobra.Command, r *snapshot.Repo, c snapshot.Change, maxBytes int64) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	read := func(e *snapshot.Entry) ([]byte, error) {
		if e == nil || e.Type != snapshot.TypeFile {
			return nil, nil
		}
		return r.ReadEntry(ctx, *e, maxBytes)
	}
	if e := c.Entry(); e.Type != snapshot.TypeFile && (c.Old == nil || c.Old.Type != snapshot.TypeFile) {
		return nil
	}
	if c.Op == snapshot.Modified && c.What&(snapshot.ChangedContent|snapshot.ChangedType) == 0 {
		return nil
	}
	before, errA := read(c.Old)
	after, errB := read(c.New)
	if errors.Is(errA, snapshot.ErrTooLarge) || errors.Is(errB, snapshot.ErrTooLarge) {
		_, err := fmt.Fprintf(out, "(%s: larger than --max-bytes %s, content not shown)\n", c.Path, fmtSize(maxBytes))
		return err
	}
	if err := errors.Join(errA, errB); err != nil {
		return err
	}
	if snapshot.IsBinary(before) || snapshot.IsBinary(after) {
		_, err := fmt.Fprintf(out, "Binary files a/%s and b/%s differ\n", c.Path, c.Path)
		return err
	}
	aName, bName := "a/"+c.Path, "b/"+c.Path
	if c.Old == nil || c.Old.Type != snapshot.TypeFile {
		aName = "/dev/null"
	}
	if c.New == nil || c.New.Type != snapshot.TypeFile {
		bName = "/dev/null"
	}
	_, err := io.WriteString(out, udiff.Unified(aName, bName, before, after, 3))
	return err
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
		Use:   "restore URL NAME",
		Short: "Make a branch's state that of a snapshot (or any reference)",
		Long: `Write a new commit on a branch (default main) whose tree is that of NAME. The
branch's state before the restore is saved first as an automatic snapshot
(auto-pre-restore-BRANCH-TIME), so a restore never loses anything: restore
that snapshot to undo it.

This form is for a branch that is not mounted read-write: it refuses while a
writer holds the branch's lease, and names that writer. (Restoring a live
mount in place needs the MOUNTPOINT form, not available yet: unmount it
first.)

` + refHelp,
		Example: `  agentfs snapshot restore file:///ws before-refactor
  agentfs snapshot restore s3://bucket/ws main@12 --branch main`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer t.close()
			res, err := t.repo.Restore(cmd.Context(), args[1], branch, snapshot.RestoreOptions{Message: msg})
			var held *snapshot.LeaseHeldError
			if errors.As(err, &held) {
				return fmt.Errorf("restore %s: %w (unmount it first)", branch, err)
			}
			if err != nil {
				return err
			}
			ew := &errWriter{w: cmd.OutOrStdout()}
			ew.printf("restored branch %s to %s: new head %v (%d files, %s)\n", branch, args[1], res.Commit.ID,
				res.Commit.Root.SubFiles, fmtSize(int64(res.Commit.Root.SubBytes)))
			if res.Saved != nil {
				ew.printf("the previous state (%v) is snapshot %s; undo with `agentfs snapshot restore %s %s --branch %s`\n",
					res.Saved.Commit, res.Saved.Name, t.URL(), res.Saved.Name, branch)
			}
			return ew.Err()
		},
	}
	c.Flags().StringVar(&branch, "branch", snapshot.DefaultBranch, "the branch to restore")
	c.Flags().StringVarP(&msg, "message", "m", "", "the restore commit's message")
	return c
}
