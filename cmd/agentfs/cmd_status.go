package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
)

func init() { subcommands = append(subcommands, newStatusCmd) }

func newStatusCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "status MOUNTPOINT",
		Short: "Show the state of a mount: head commit, bytes waiting, cache use, lease",
		Long: `Show the state of the agentfs mount at MOUNTPOINT: the volume and branch, the
last commit, what waits to be uploaded, the local cache's use, the writer lease,
the volume's branch and snapshot counts, its retention policy and the mount's
last background gc, and the blob store's counters since the mount started.
--json prints the same as one JSON object (fields "mount", "volume", "store",
"refs", "retention").`,
		Example: `  agentfs status ./workspace
  agentfs status --json /mnt/ws | jq .volume.dirty_bytes`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := findMount(ctx, args[0])
			if err != nil {
				return err
			}
			st, err := c.Status(ctx)
			if err != nil {
				return fmt.Errorf("status of %s: %w", c.MountPoint(), err)
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return writeStatus(cmd.OutOrStdout(), st, time.Now())
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return c
}

// writeStatus prints st for people.
func writeStatus(w io.Writer, st control.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	v, m, s := st.Volume, st.Info, st.Store
	mode := "read-write"
	if m.ReadOnly {
		mode = "read-only"
	}
	row := func(k, format string, a ...any) { _, _ = fmt.Fprintf(tw, "%s:\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("mount", "%s (server pid %d, up %s)", m.MountPoint, m.PID, now.Sub(m.Started).Round(time.Second))
	row("volume", "%s branch %s (%s)", m.URL, v.Branch, mode)
	if vi := m.Virtual; vi != nil {
		base := vi.HostDir
		if base == "" {
			base = vi.Base
		}
		if base == "" {
			base = "a commit of the volume"
		}
		row("virtual", "workspace %s over %s (agentfs diff|commit|discard %s)", vi.Name, base, m.MountPoint)
	}
	if v.DivergedFrom != "" {
		row("diverged", "branch %s moved on while this cache had changes; they are committed to branch %s", v.DivergedFrom, v.Branch)
	}
	head := fmt.Sprintf("%d", v.HeadSeq)
	if !v.LastCheckpoint.IsZero() {
		head += fmt.Sprintf(" (last checkpoint %s ago, took %s; commits by this mount: %d)",
			now.Sub(v.LastCheckpoint).Round(time.Second), v.LastCheckpointDur.Round(time.Millisecond), v.Commits)
	}
	row("head commit", "%s", head)
	if v.DirtyFiles == 0 && v.DirtyDirs == 0 {
		row("waiting", "nothing: everything is in the store")
	} else {
		row("waiting", "%d files (up to %s) and %d directories to commit", v.DirtyFiles, humanBytes(v.DirtyBytes), v.DirtyDirs)
	}
	if st.Refs != nil {
		row("history", "%d branches, %d snapshots (agentfs branch list / snapshot list %s)", st.Refs.Branches, st.Refs.Snapshots, m.MountPoint)
	}
	if r := st.Retention; r != nil {
		row("retention", "%s", retentionLine(*r))
		if l := autoGCLine(r.LastGC, now); l != "" {
			row("gc", "%s", l)
		}
	}
	row("open files", "%d", v.OpenFiles)
	row("cache", "%s of %s clean data in %s", humanBytes(v.CacheBytes), humanBytes(v.CacheLimit), v.CacheDir)
	if v.PinnedFiles > 0 {
		row("pinned", "%d files, %s, for FUSE passthrough (at most half the cache)", v.PinnedFiles, humanBytes(v.PinnedBytes))
	}
	switch {
	case m.ReadOnly:
		row("lease", "none (read-only)")
	case v.Lease != nil:
		lease := v.Lease.String()
		if v.LeaseError != "" {
			lease += "; renewal failing: " + v.LeaseError
		}
		row("lease", "%s", lease)
	}
	row("store", "%d PUTs (%s up), %d GETs (%s down), %d errors since mount",
		s.BlobPuts, humanBytes(s.BytesUploaded), s.BlobGets, humanBytes(s.BytesDownloaded), s.BlobErrors)
	if len(st.FUSE) > 0 {
		ops := slices.Clone(st.FUSE)
		slices.SortFunc(ops, func(a, b afs.OpStats) int { return cmp.Compare(b.Calls, a.Calls) })
		var total int64
		var parts []string
		for i, o := range ops {
			total += o.Calls
			if i < 6 {
				parts = append(parts, fmt.Sprintf("%s %d", o.Op, o.Calls))
			}
		}
		row("requests", "%d since mount (%s)", total, strings.Join(parts, ", "))
	}
	if v.LastError != "" {
		row("last error", "%s", strings.TrimSpace(v.LastError))
	}
	return tw.Flush()
}
