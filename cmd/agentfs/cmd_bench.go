package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentfs/agentfs/bench"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

// benchMountProbe recognises agentfs mounts among the targets of `agentfs
// bench`. It is nil until the mount's command file sets it (in its init)
// to a probe that speaks to a mount's control socket; while nil, bench
// reports no mount figures for any target.
var benchMountProbe bench.MountProbe

func newBenchCmd() *cobra.Command {
	var (
		quick     bool
		repeats   int
		jsonOut   bool
		jsonFile  string
		svgFile   string
		workloads string
		cold      string
		p         = bench.DefaultParams()
	)
	c := &cobra.Command{
		Use:   "bench DIR [DIR...]",
		Short: "Run filesystem workloads side by side in directories (a mount vs the local disk)",
		Long: `Run the same filesystem workloads in each DIR, in one run, and compare them.

Workloads (--workloads, comma-separated; default all):
  bigfile       sequential write + fsync and cold read of one large file per thread
                (issue 17's 1 GiB: --threads 1 --bigfile-size 1GiB)
  random        4 KiB preads (page cache, then O_DIRECT as fio --direct=1) and
                pwrites at random offsets of a large file
  smallfiles    create, stat, read and delete many small files in a tree
  metadata      mkdir, rename of files and of directories, ls -l of a large directory
  git           git add -A and commit of a fresh source tree, then git status
  node_modules  unpack a node_modules-shaped tree (npm-style) and rm -rf it
  editloop      open, change a few lines, write, fsync, over many source files
  tree          the system's tar -x, ls -lR (cold, then warm), grep -r and cp -r
                of a source tree of --tree-files files

Every workload runs --repeats times in every DIR, interleaved: repeat by
repeat, workload by workload, with the order of the DIRs rotating, so that
machine noise shows up as spread rather than as a difference between targets.
Each run works in a new hidden directory inside DIR and removes it afterwards.
The table shows, per phase and DIR, the median ops/s and MiB/s over repeats,
their spread ((max-min)/median), p50/p99 latency over every operation, and the
ratio of the median ops/s to the first DIR's (higher is faster).

Reads are made cold first (--cold): "auto" drops the page cache, dentries and
inodes machine-wide (sync; echo 3 > /proc/sys/vm/drop_caches) when running as
root, and otherwise drops the files' pages with posix_fadvise; the report says
which caches were cold. Caches inside a FUSE server are never dropped.

When a DIR is inside an agentfs mount, bench also reports what the mount did
during each workload: blob PUTs and GETs, MiB uploaded and downloaded, the
cache hit ratio, and the time to sync (agentfs sync) after it; and for each
phase the FUSE requests the mount served per operation, by kind (the round
trips one create, one listed file, ... costs). What a workload sets up before
a timed phase, and what a timed phase wrote before reads are made cold (tar -x,
the bigfile write), is synced first: syncfs, and in an agentfs mount its sync too (the kernel passes
syncfs to no FUSE server), so that the mount's next checkpoint of it does not
land in whichever phase runs then.

The defaults finish in a few minutes for two DIRs on a 2-core machine; --quick
is a sub-minute smoke run. Progress is shown on stderr when it is a terminal.
The exit status is 1 if any workload failed in any DIR (the report says why).`,
		Example: `  agentfs bench /tmp/plain /mnt/workspace
  agentfs bench --quick --json /tmp/a /tmp/b > bench.json
  agentfs bench --workloads git,editloop --repeats 5 --svg bench.svg ~/src /mnt/ws`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if quick {
				q := bench.QuickParams()
				// Flags given explicitly override the quick sizes.
				copyChangedParams(cmd.Flags(), &q, p)
				p = q
				if !cmd.Flags().Changed("repeats") {
					repeats = 1
				}
			}
			p.Cold = bench.ColdMode(cold)
			var names []string
			if workloads != "" {
				for n := range strings.SplitSeq(workloads, ",") {
					names = append(names, strings.TrimSpace(n))
				}
			}
			ws, err := bench.SelectWorkloads(names)
			if err != nil {
				return err
			}
			cfg := bench.Config{Params: p, Workloads: ws, Repeats: repeats, Probe: benchMountProbe}
			var line *bench.ProgressLine
			if f, ok := cmd.ErrOrStderr().(*os.File); ok && bench.IsTerminal(f) {
				line = bench.NewProgressLine(f)
				cfg.Progress = bench.BenchProgress(line)
			}
			rep, runErr := bench.Run(cmd.Context(), cfg, dirs)
			if line != nil {
				line.Clear()
			}
			if rep == nil {
				return runErr
			}
			if err := writeBenchOutputs(cmd, rep, jsonOut, jsonFile, svgFile); err != nil {
				return errors.Join(runErr, err)
			}
			return runErr
		},
	}
	f := c.Flags()
	f.BoolVar(&quick, "quick", false, "small sizes and 1 repeat: a sub-minute smoke run (explicit flags still apply)")
	f.IntVar(&repeats, "repeats", 3, "runs of every workload in every DIR")
	f.BoolVar(&jsonOut, "json", false, "print the report as JSON instead of a table")
	f.StringVar(&jsonFile, "json-out", "", "also write the JSON report to `FILE`")
	f.StringVar(&svgFile, "svg", "", "also write a bar chart comparing the DIRs to `FILE` (SVG)")
	f.StringVar(&workloads, "workloads", "", "comma-separated workloads to run (default all)")
	f.StringVar(&cold, "cold", string(bench.ColdAuto), "how reads are made cold: auto, drop (root), fadvise or none")
	f.IntVar(&p.Threads, "threads", p.Threads, "concurrent streams of the bigfile and random workloads")
	f.Var(sizeValue{&p.BigFileSize}, "bigfile-size", "size of each bigfile thread's file")
	f.Var(blockSizeValue{&p.BlockSize}, "block-size", "size of each bigfile read and write")
	f.Var(sizeValue{&p.RandFileSize}, "rand-file-size", "size of the file random I/O runs in")
	f.IntVar(&p.RandOps, "rand-ops", p.RandOps, "random reads, and random writes, per run")
	f.IntVar(&p.SmallFiles, "small-files", p.SmallFiles, "files of the smallfiles workload")
	f.Var(blockSizeValue{&p.SmallFileSize}, "small-file-size", "size of each small file")
	f.IntVar(&p.MetaOps, "meta-ops", p.MetaOps, "directories created and files and directories renamed")
	f.IntVar(&p.ReaddirEntries, "readdir-entries", p.ReaddirEntries, "entries of the directory the metadata workload lists")
	f.IntVar(&p.ReaddirRepeats, "readdir-repeats", p.ReaddirRepeats, "listings of that directory per run")
	f.IntVar(&p.GitFiles, "git-files", p.GitFiles, "source files of the git workload's tree")
	f.IntVar(&p.GitStatusRepeats, "git-status-repeats", p.GitStatusRepeats, "git status runs per run")
	f.IntVar(&p.NodePackages, "node-packages", p.NodePackages, "top-level packages of the node_modules tree")
	f.IntVar(&p.EditFiles, "edit-files", p.EditFiles, "files the edit loop edits")
	f.IntVar(&p.TreeFiles, "tree-files", p.TreeFiles, "source files of the tree workload (tar -x, ls -lR, grep -r, cp -r)")
	f.Uint64Var(&p.Seed, "seed", p.Seed, "seed of the generated trees and random offsets")
	return c
}

// copyChangedParams copies into dst the fields of src whose flags were
// given on the command line.
func copyChangedParams(fs *pflag.FlagSet, dst *bench.Params, src bench.Params) {
	set := map[string]func(){
		"threads":            func() { dst.Threads = src.Threads },
		"bigfile-size":       func() { dst.BigFileSize = src.BigFileSize },
		"block-size":         func() { dst.BlockSize = src.BlockSize },
		"rand-file-size":     func() { dst.RandFileSize = src.RandFileSize },
		"rand-ops":           func() { dst.RandOps = src.RandOps },
		"small-files":        func() { dst.SmallFiles = src.SmallFiles },
		"small-file-size":    func() { dst.SmallFileSize = src.SmallFileSize },
		"meta-ops":           func() { dst.MetaOps = src.MetaOps },
		"readdir-entries":    func() { dst.ReaddirEntries = src.ReaddirEntries },
		"readdir-repeats":    func() { dst.ReaddirRepeats = src.ReaddirRepeats },
		"git-files":          func() { dst.GitFiles = src.GitFiles },
		"git-status-repeats": func() { dst.GitStatusRepeats = src.GitStatusRepeats },
		"node-packages":      func() { dst.NodePackages = src.NodePackages },
		"edit-files":         func() { dst.EditFiles = src.EditFiles },
		"tree-files":         func() { dst.TreeFiles = src.TreeFiles },
		"seed":               func() { dst.Seed = src.Seed },
	}
	fs.Visit(func(f *pflag.Flag) {
		if apply, ok := set[f.Name]; ok {
			apply()
		}
	})
}

func writeBenchOutputs(cmd *cobra.Command, rep *bench.Report, jsonOut bool, jsonFile, svgFile string) error {
	out := cmd.OutOrStdout()
	var err error
	if jsonOut {
		err = bench.WriteJSON(out, rep)
	} else {
		err = bench.WriteTable(out, rep)
	}
	if err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	if jsonFile != "" {
		if err := writeFileWith(jsonFile, func(f *os.File) error { return bench.WriteJSON(f, rep) }); err != nil {
			return err
		}
	}
	if svgFile != "" {
		if err := writeFileWith(svgFile, func(f *os.File) error { return bench.WriteSVG(f, rep) }); err != nil {
			return err
		}
	}
	return nil
}

// writeFileWith creates path, fills it with write and closes it; on
// failure it removes the partial file.
func writeFileWith(path string, write func(f *os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", path, err), os.Remove(path))
	}
	return nil
}
