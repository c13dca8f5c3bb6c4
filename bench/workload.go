package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Params size the filesystem workloads. DefaultParams finishes in a few
// minutes on a 2-core machine for two targets; QuickParams is a sub-minute
// smoke run. Sizes are in bytes.
type Params struct {
	// Threads is the number of concurrent streams of the big-file and
	// random-I/O workloads (at least 1).
	Threads int `json:"threads"`
	// BigFileSize is the size of the file each big-file thread writes and
	// reads; BlockSize the size of each read or write call.
	BigFileSize int64 `json:"bigfile_size"`
	BlockSize   int   `json:"block_size"`
	// RandFileSize is the size of the file random 4 KiB I/O runs in;
	// RandOps the number of reads, and of writes, over all threads.
	RandFileSize int64 `json:"rand_file_size"`
	RandOps      int   `json:"rand_ops"`
	// SmallFiles files of SmallFileSize bytes, SmallFanout per directory.
	SmallFiles    int `json:"small_files"`
	SmallFileSize int `json:"small_file_size"`
	SmallFanout   int `json:"small_fanout"`
	// MetaOps directories to create and files and directories to rename;
	// ReaddirEntries entries in the directory listed ReaddirRepeats times.
	MetaOps        int `json:"meta_ops"`
	ReaddirEntries int `json:"readdir_entries"`
	ReaddirRepeats int `json:"readdir_repeats"`
	// GitFiles source files committed; GitStatusRepeats `git status` runs.
	GitFiles         int `json:"git_files"`
	GitStatusRepeats int `json:"git_status_repeats"`
	// NodePackages packages in the node_modules-shaped tree.
	NodePackages int `json:"node_packages"`
	// EditFiles files the edit loop opens, modifies, writes and fsyncs.
	EditFiles int `json:"edit_files"`
	// TreeFiles source files of the tree workload's tree (tar -x, ls -lR,
	// grep -r, cp -r).
	TreeFiles int `json:"tree_files"`
	// Cold says how caches are dropped before reads.
	Cold ColdMode `json:"cold"`
	// Seed makes generated trees and random offsets reproducible.
	Seed uint64 `json:"seed"`
}

// DefaultParams returns the default workload sizes.
func DefaultParams() Params {
	return Params{
		Threads:          2,
		BigFileSize:      256 << 20,
		BlockSize:        1 << 20,
		RandFileSize:     256 << 20,
		RandOps:          4000,
		SmallFiles:       5000,
		SmallFileSize:    4 << 10,
		SmallFanout:      100,
		MetaOps:          2000,
		ReaddirEntries:   5000,
		ReaddirRepeats:   20,
		GitFiles:         3000,
		GitStatusRepeats: 10,
		NodePackages:     150,
		EditFiles:        1000,
		TreeFiles:        10000,
		Cold:             ColdAuto,
		Seed:             1,
	}
}

// QuickParams returns sizes for a sub-minute smoke run (CI): every workload
// and phase runs, on small data.
func QuickParams() Params {
	return Params{
		Threads:          2,
		BigFileSize:      8 << 20,
		BlockSize:        1 << 20,
		RandFileSize:     8 << 20,
		RandOps:          400,
		SmallFiles:       300,
		SmallFileSize:    4 << 10,
		SmallFanout:      50,
		MetaOps:          200,
		ReaddirEntries:   500,
		ReaddirRepeats:   5,
		GitFiles:         200,
		GitStatusRepeats: 3,
		NodePackages:     15,
		EditFiles:        100,
		TreeFiles:        300,
		Cold:             ColdAuto,
		Seed:             1,
	}
}

// Validate reports the first parameter that cannot be used.
func (p Params) Validate() error {
	checks := []struct {
		name string
		v    int64
		min  int64
	}{
		{"threads", int64(p.Threads), 1},
		{"bigfile size", p.BigFileSize, 1},
		{"block size", int64(p.BlockSize), 1},
		{"random file size", p.RandFileSize, 4096},
		{"random ops", int64(p.RandOps), 1},
		{"small files", int64(p.SmallFiles), 1},
		{"small file size", int64(p.SmallFileSize), 0},
		{"small fan-out", int64(p.SmallFanout), 1},
		{"metadata ops", int64(p.MetaOps), 1},
		{"readdir entries", int64(p.ReaddirEntries), 1},
		{"readdir repeats", int64(p.ReaddirRepeats), 1},
		{"git files", int64(p.GitFiles), 1},
		{"git status repeats", int64(p.GitStatusRepeats), 1},
		{"node packages", int64(p.NodePackages), 1},
		{"edit files", int64(p.EditFiles), 1},
		{"tree files", int64(p.TreeFiles), 1},
	}
	for _, c := range checks {
		if c.v < c.min {
			return fmt.Errorf("%s is %d, must be at least %d", c.name, c.v, c.min)
		}
	}
	return p.Cold.Validate()
}

// Phase names one measured step of a workload and what one operation is.
type Phase struct {
	Name string `json:"name"`
	// Op says what one operation of this phase is, for readers of the
	// report ("one 4 KiB pread at a random offset").
	Op string `json:"op"`
}

// Workload is one named benchmark. Run is called with an empty directory it
// owns; it creates what it needs (untimed), measures its phases in order,
// and may leave files behind (the runner removes the directory).
type Workload struct {
	Name   string  `json:"name"`
	Doc    string  `json:"doc"`
	Phases []Phase `json:"phases"`
	run    func(e *env) error
}

// Sample is the measurement of one phase in one run: Ops operations moving
// Bytes payload bytes in Elapsed wall time, with one latency per operation
// where operations are timed one by one (Latencies is empty otherwise).
type Sample struct {
	Phase     string
	Ops       int64
	Bytes     int64
	Elapsed   time.Duration
	Latencies []time.Duration
	// Cold describes which caches were dropped before the phase ("" when
	// the phase does not drop caches).
	Cold string
	// Requests counts the FUSE requests an agentfs mount served during the
	// phase, by kind; nil for other targets.
	Requests map[string]int64
}

// Workloads returns every workload in the order bench runs them.
func Workloads() []Workload {
	return []Workload{
		bigFileWorkload(),
		randomWorkload(),
		smallFilesWorkload(),
		metadataWorkload(),
		gitWorkload(),
		nodeModulesWorkload(),
		editLoopWorkload(),
		treeWorkload(),
	}
}

// SelectWorkloads returns the workloads named in names (all for an empty
// list), in the order of Workloads. An unknown name is an error that lists
// the known ones.
func SelectWorkloads(names []string) ([]Workload, error) {
	all := Workloads()
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []Workload
	var known []string
	for _, w := range all {
		known = append(known, w.Name)
		if want[w.Name] {
			out = append(out, w)
			delete(want, w.Name)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("unknown workload %q: choose from %s", n, strings.Join(known, ", "))
	}
	return out, nil
}

// RunWorkload runs w once in dir, which must exist and be empty, and
// returns one Sample per phase in the order of w.Phases.
func RunWorkload(ctx context.Context, w Workload, dir string, p Params) ([]Sample, error) {
	return runWorkload(ctx, w, dir, p, nil)
}

// runWorkload is RunWorkload in a directory of mount m (nil for any other
// target), whose FUSE request counters it reads around every phase.
func runWorkload(ctx context.Context, w Workload, dir string, p Params, m Mount) ([]Sample, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	e := &env{ctx: ctx, dir: dir, p: p, rng: rand.New(rand.NewPCG(p.Seed, 0x5eed)), mount: m}
	if err := w.run(e); err != nil {
		return e.samples, fmt.Errorf("workload %s in %s: %w", w.Name, dir, err)
	}
	if len(e.samples) != len(w.Phases) {
		return e.samples, fmt.Errorf("workload %s measured %d phases, declares %d", w.Name, len(e.samples), len(w.Phases))
	}
	for i, s := range e.samples {
		if s.Phase != w.Phases[i].Name {
			return e.samples, fmt.Errorf("workload %s measured phase %q where %q was declared", w.Name, s.Phase, w.Phases[i].Name)
		}
	}
	return e.samples, nil
}

// env is what a workload's run function gets: its directory, the
// parameters, a seeded random source and the phase recorder. It is used
// from the workload's goroutine; recorder is safe for concurrent use.
type env struct {
	ctx     context.Context
	dir     string
	p       Params
	rng     *rand.Rand
	samples []Sample
	cold    string // set by makeCold, attached to the next measured phase
	mount   Mount  // the agentfs mount dir is in, or nil
}

// requests returns the mount's FUSE request counters (nil without a
// mount, or when the mount cannot say).
func (e *env) requests() (map[string]int64, error) {
	if e.mount == nil {
		return nil, nil
	}
	st, err := e.mount.Stats(e.ctx)
	if err != nil {
		return nil, fmt.Errorf("mount stats: %w", err)
	}
	return st.Requests, nil
}

// measure times fn as phase name and appends its Sample.
func (e *env) measure(name string, fn func(r *recorder) error) error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	before, err := e.requests()
	if err != nil {
		return fmt.Errorf("phase %s: %w", name, err)
	}
	r := &recorder{}
	start := time.Now()
	err = fn(r)
	elapsed := time.Since(start)
	if err != nil {
		return fmt.Errorf("phase %s: %w", name, err)
	}
	if r.ops == 0 {
		return fmt.Errorf("phase %s: %w", name, errNoOps)
	}
	after, err := e.requests()
	if err != nil {
		return fmt.Errorf("phase %s: %w", name, err)
	}
	e.samples = append(e.samples, Sample{Phase: name, Ops: r.ops, Bytes: r.bytes, Elapsed: elapsed, Latencies: r.lat, Cold: e.cold,
		Requests: subCounts(after, before)})
	e.cold = ""
	return nil
}

var errNoOps = errors.New("measured no operations")

// recorder collects the operations of one phase. Safe for concurrent use.
type recorder struct {
	mu    sync.Mutex
	ops   int64           // guarded by mu
	bytes int64           // guarded by mu
	lat   []time.Duration // guarded by mu
}

// op records one operation that started at start and moved n bytes.
func (r *recorder) op(start time.Time, n int64) {
	d := time.Since(start)
	r.mu.Lock()
	r.ops++
	r.bytes += n
	r.lat = append(r.lat, d)
	r.mu.Unlock()
}

// bulk records ops operations timed together (no per-operation latency).
func (r *recorder) bulk(ops, n int64) {
	r.mu.Lock()
	r.ops += ops
	r.bytes += n
	r.mu.Unlock()
}
