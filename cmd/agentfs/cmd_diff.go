package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newDiffCmd) }

func newDiffCmd() *cobra.Command {
	var stat, patch, jsonOut bool
	var maxBytes int64 = control.DefaultMaxBytes
	c := &cobra.Command{
		Use:   "diff MOUNTPOINT [PATHS...]",
		Short: "Show what a virtual mount changed relative to its base",
		Long: `List the paths the virtual mount at MOUNTPOINT added (A), modified (M),
deleted (D) and renamed (R, "OLD -> NEW") relative to its base: a snapshot or
branch of the volume, or a host directory (compared with its current state).
Nothing reaches the base until ` + "`agentfs commit`" + `; ` + "`agentfs discard`" + ` drops changes.

A renamed directory is one change; what was edited inside it is listed with
its new path. With PATHS, only those paths and what lies below them (relative
to the mount's root, or paths inside the mount).

--stat prints a line per change with the lines added and removed, and a
summary; -p adds a unified content diff of each text file (binary files and
files over --max-bytes are named, not shown); --json prints the changes, with
the line counts and diffs that --stat or -p ask for.

The cost follows the size of the change, not of the base: untouched
directories are not read.`,
		Example: `  agentfs diff ./ws
  agentfs diff ./ws -p src/
  agentfs diff ./ws --stat
  agentfs diff ./ws --json -p | jq '.changes[].path'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, paths, err := findWorkspace(ctx, args)
			if err != nil {
				return err
			}
			rep, err := cl.VirtualDiff(ctx, control.VirtualDiffRequest{Paths: paths, Stat: stat, Patch: patch, MaxBytes: maxBytes})
			if err != nil {
				return fmt.Errorf("diff %s: %w", cl.MountPoint(), err)
			}
			out := cmd.OutOrStdout()
			switch {
			case jsonOut:
				return writeDiffJSON(out, cl.MountPoint(), rep)
			case stat:
				return writeDiffStat(out, rep)
			}
			for _, c := range rep.Changes {
				if _, err := fmt.Fprintln(out, virtualChangeLine(c.Change)); err != nil {
					return err
				}
				if patch && c.Patch != nil {
					if err := writeFilePatch(out, c, maxBytes); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&stat, "stat", false, "a line per change with lines added and removed, and a summary")
	c.Flags().BoolVarP(&patch, "patch", "p", false, "show unified content diffs of text files")
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	c.Flags().Var(byteCountFlag{&maxBytes}, "max-bytes", "largest file whose content --stat and -p compare")
	return c
}

// virtualChangeLine is the one-line form of a workspace change.
func virtualChangeLine(c overlay.Change) string {
	p, from := c.Path, c.From
	if c.Type == snapshot.TypeDir {
		p += "/"
		if from != "" {
			from += "/"
		}
	}
	switch c.Op {
	case overlay.Added:
		if c.Type == snapshot.TypeDir {
			return "A  " + p
		}
		return fmt.Sprintf("A  %s  (%s)", p, fmtSize(int64(c.Size)))
	case overlay.Deleted:
		if c.Type == snapshot.TypeDir {
			return "D  " + p
		}
		return fmt.Sprintf("D  %s  (%s)", p, fmtSize(int64(c.Size)))
	case overlay.Renamed:
		if c.Type == snapshot.TypeDir || c.Size == c.OldSize {
			return fmt.Sprintf("R  %s -> %s", from, p)
		}
		return fmt.Sprintf("R  %s -> %s  (%s -> %s)", from, p, fmtSize(int64(c.OldSize)), fmtSize(int64(c.Size)))
	}
	if c.Type == snapshot.TypeDir {
		return "M  " + p
	}
	return fmt.Sprintf("M  %s  (%s -> %s)", p, fmtSize(int64(c.OldSize)), fmtSize(int64(c.Size)))
}

// writeFilePatch writes the content diff of one change for -p.
func writeFilePatch(out io.Writer, c control.FileChange, maxBytes int64) error {
	p := c.Patch
	var err error
	switch {
	case p.TooLarge:
		_, err = fmt.Fprintf(out, "(%s: larger than --max-bytes %s, content not shown)\n", c.Path, fmtSize(maxBytes))
	case p.Binary:
		a, b := "a/"+c.Path, "b/"+c.Path
		if c.From != "" {
			a = "a/" + c.From
		}
		switch c.Op {
		case overlay.Added:
			a = "/dev/null"
		case overlay.Deleted:
			b = "/dev/null"
		}
		_, err = fmt.Fprintf(out, "Binary files %s and %s differ\n", a, b)
	default:
		_, err = io.WriteString(out, p.Text)
	}
	return err
}

// writeDiffStat writes --stat: a line per change and a summary.
func writeDiffStat(out io.Writer, rep control.VirtualDiffReply) error {
	type row struct{ name, what string }
	var rows []row
	width, files, ins, del := 0, 0, 0, 0
	for _, c := range rep.Changes {
		slash := ""
		if c.Type == snapshot.TypeDir {
			if c.Op == overlay.Modified {
				continue // its entries are listed; an attribute change has no lines
			}
			slash = "/"
		}
		name := c.Path + slash
		if c.Op == overlay.Renamed {
			name = c.From + slash + " -> " + name
		}
		var what string
		switch p := c.Patch; {
		case c.Type == snapshot.TypeDir:
			what = map[overlay.ChangeOp]string{overlay.Added: "new directory", overlay.Deleted: "deleted directory", overlay.Renamed: "renamed"}[c.Op]
		case p == nil:
			what = c.Type.String()
		case p.TooLarge || p.Binary:
			before, after := changeSizes(c.Change)
			what = fmt.Sprintf("Bin %s -> %s", fmtSize(int64(before)), fmtSize(int64(after)))
			files++
		default:
			what = strings.TrimSpace(fmt.Sprintf("%d %s%s", p.Added+p.Deleted, strings.Repeat("+", min(p.Added, 30)), strings.Repeat("-", min(p.Deleted, 30))))
			files++
			ins += p.Added
			del += p.Deleted
		}
		width = max(width, len(name))
		rows = append(rows, row{name, what})
	}
	width = min(width, 60)
	for _, r := range rows {
		if _, err := fmt.Fprintf(out, " %-*s | %s\n", width, r.name, r.what); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, " %s, %s changed, %s(+), %s(-) relative to %s\n",
		plural(len(rows), "change"), plural(files, "file"), plural(ins, "insertion"), plural(del, "deletion"), rep.Base)
	return err
}

// changeSizes returns a change's sizes before and after it.
func changeSizes(c overlay.Change) (before, after uint64) {
	switch c.Op {
	case overlay.Added:
		return 0, c.Size
	case overlay.Deleted:
		return c.Size, 0
	}
	return c.OldSize, c.Size
}

// diffJSON is one change in `agentfs diff --json`.
type diffJSON struct {
	Op       string `json:"op"` // added, modified, deleted, renamed
	Path     string `json:"path"`
	From     string `json:"from,omitempty"` // the base path of a renamed entry, or of one inside a renamed directory
	Type     string `json:"type"`
	Size     uint64 `json:"size"`     // after the change (0 for a deletion)
	OldSize  uint64 `json:"old_size"` // before it (0 for an addition)
	Added    *int   `json:"lines_added,omitempty"`
	Deleted  *int   `json:"lines_deleted,omitempty"`
	Binary   bool   `json:"binary,omitempty"`
	TooLarge bool   `json:"too_large,omitempty"`
	Patch    string `json:"patch,omitempty"`
}

var opNames = map[overlay.ChangeOp]string{overlay.Added: "added", overlay.Modified: "modified", overlay.Deleted: "deleted", overlay.Renamed: "renamed"}

func writeDiffJSON(out io.Writer, mnt string, rep control.VirtualDiffReply) error {
	changes := []diffJSON{}
	for _, c := range rep.Changes {
		j := diffJSON{Op: opNames[c.Op], Path: c.Path, From: c.From, Type: c.Type.String()}
		j.OldSize, j.Size = changeSizes(c.Change)
		if p := c.Patch; p != nil {
			j.Binary, j.TooLarge, j.Patch = p.Binary, p.TooLarge, p.Text
			if !p.Binary && !p.TooLarge {
				j.Added, j.Deleted = &p.Added, &p.Deleted
			}
		}
		changes = append(changes, j)
	}
	return writeJSON(out, struct {
		MountPoint string     `json:"mount_point"`
		Base       string     `json:"base"`
		Changes    []diffJSON `json:"changes"`
	}{mnt, rep.Base, changes})
}
