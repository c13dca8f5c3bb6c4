package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/bench"
	"github.com/agentfs/agentfs/blobstore"
)

func init() { subcommands = append(subcommands, newObjbenchCmd) }

func newObjbenchCmd() *cobra.Command {
	var (
		quick   bool
		jsonOut bool
		svgFile string
		concs   string
		cfg     = bench.DefaultObjConfig()
	)
	c := &cobra.Command{
		Use:   "objbench URL",
		Short: "Measure a blob store: put/get/stat/list/delete and conditional create",
		Long: `Measure the blob store at URL: throughput and latency percentiles of put,
stat, get, list, put-if-absent (conditional create) and delete, for every
object size (--sizes) at every concurrency level (--concurrency).

Each cell (one size at one concurrency) writes --bytes-per-cell bytes of
objects (at least one per concurrent worker, at most --max-objects), stats,
reads and lists them, creates as many again with put-if-absent, and deletes
them all. In cells of the smallest size, concurrent conditional creates of one
key also race, and exactly one must win. Cells whose size × concurrency exceeds
--max-inflight are skipped and listed.

objbench works under a new prefix of its own (agentfs-objbench-<time>-<random>)
below URL and removes everything it wrote, also after a failure or Ctrl-C. It
refuses to run where URL holds an agentfs volume (a volume.json key at its
root): point it at an empty prefix instead.

URL is a store URL as for every agentfs command: file:///abs/path,
s3://bucket/prefix?endpoint=URL&region=R&path_style=true, gs://bucket/prefix,
mem://name. Progress is shown on stderr when it is a terminal.`,
		Example: `  agentfs objbench file:///var/tmp/objbench
  agentfs objbench --quick --json file:///tmp/x > objbench.json
  agentfs objbench --sizes 4KiB,1MiB --concurrency 1,16 --svg s3.svg 's3://bucket/scratch?endpoint=http://127.0.0.1:9000&path_style=true'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			fl := cmd.Flags()
			if quick {
				q := bench.QuickObjConfig()
				if fl.Changed("sizes") {
					q.Sizes = cfg.Sizes
				}
				if fl.Changed("bytes-per-cell") {
					q.BytesPerCell = cfg.BytesPerCell
				}
				if fl.Changed("max-objects") {
					q.MaxObjects = cfg.MaxObjects
				}
				if fl.Changed("max-inflight") {
					q.MaxInflight = cfg.MaxInflight
				}
				if fl.Changed("list-page") {
					q.ListPage = cfg.ListPage
				}
				cfg = q
			}
			if fl.Changed("concurrency") || !quick {
				levels, err := parseInts(concs)
				if err != nil {
					return fmt.Errorf("--concurrency: %w", err)
				}
				cfg.Concurrency = levels
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			// The store's own limit must not cap the highest level measured.
			st, err := blobstore.Open(cmd.Context(), args[0], blobstore.Options{MaxConcurrency: slices.Max(cfg.Concurrency)})
			if err != nil {
				return err
			}
			defer func() {
				if cerr := st.Close(); cerr != nil {
					err = errors.Join(err, fmt.Errorf("close %s: %w", args[0], cerr))
				}
			}()
			var line *bench.ProgressLine
			if f, ok := cmd.ErrOrStderr().(*os.File); ok && bench.IsTerminal(f) {
				line = bench.NewProgressLine(f)
				cfg.Progress = func(p bench.ObjProgress) {
					line.Set(fmt.Sprintf("[cell %d/%d] %s objects, concurrency %d: %s", p.Cell, p.Cells, bench.FormatSize(p.Size), p.Concurrency, p.Op))
				}
			}
			rep, runErr := bench.RunObj(cmd.Context(), st, cfg)
			if line != nil {
				line.Clear()
			}
			if rep == nil {
				return runErr
			}
			if runErr != nil {
				// A partial report is still worth a table on stderr.
				if err := bench.WriteObjTable(cmd.ErrOrStderr(), rep); err != nil {
					return errors.Join(runErr, err)
				}
				return runErr
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				err = bench.WriteJSON(out, rep)
			} else {
				err = bench.WriteObjTable(out, rep)
			}
			if err != nil {
				return fmt.Errorf("write the report: %w", err)
			}
			if svgFile != "" {
				return writeFileWith(svgFile, func(f *os.File) error { return bench.WriteObjSVG(f, rep) })
			}
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&quick, "quick", false, "sizes 4KiB,64KiB,1MiB at concurrency 1,8 with few objects: a sub-minute smoke run (explicit flags still apply)")
	f.BoolVar(&jsonOut, "json", false, "print the report as JSON instead of a table")
	f.StringVar(&svgFile, "svg", "", "also write bar charts of the results to `FILE` (SVG)")
	f.Var(sizesValue{&cfg.Sizes}, "sizes", "comma-separated object sizes")
	f.StringVar(&concs, "concurrency", joinInts(cfg.Concurrency), "comma-separated numbers of operations in flight")
	f.Var(sizeValue{&cfg.BytesPerCell}, "bytes-per-cell", "bytes of objects each cell writes (bounded by --max-objects)")
	f.IntVar(&cfg.MaxObjects, "max-objects", cfg.MaxObjects, "most objects a cell writes")
	f.Var(sizeValue{&cfg.MaxInflight}, "max-inflight", "skip cells whose size × concurrency exceeds this (0: no limit)")
	f.IntVar(&cfg.ListPage, "list-page", cfg.ListPage, "page size of the measured list calls")
	return c
}

func parseInts(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number: %w", part, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}
