// Command mountperf measures an agentfs mount against go-fuse's loopback
// filesystem and the plain local directory, in the same run, over the same
// disk: the workloads of issue 4's performance targets. scripts/mount-perf.sh
// builds and runs it; see there for the usage.
//
// Every target gets the same workloads, repeat by repeat, with the order
// of the targets rotating, and the table shows the median time of each
// phase, the spread of the repeats, and its ratio to loopback's median:
//
//   - smallfiles: create 10,000 files of 4 KiB (100 directories of 100),
//     stat them, read them, delete them;
//   - git-status: `git status` in a committed repository of 5,000 files
//     (the median of 5 runs after one warm-up run);
//   - seq-write: write 1 GiB sequentially in 1 MiB writes, then fsync;
//   - sync (upload), agentfs only: `agentfs sync` of the mount, which
//     uploads the file to the store (otherwise the background upload would
//     run during the cold read);
//   - seq-read: read it back in 1 MiB reads after dropping the page cache
//     (root only; otherwise the read is reported as warm).
//
// Two loopbacks run: "loopback" is go-fuse's loopback with FUSE passthrough
// disabled, so that its file data flows through the FUSE server as an
// agentfs mount's must (the FUSE limit for a server that sees the data);
// "loopback-pt" is `agentfs loopback`, whose reads and writes the kernel
// sends straight to the backing file (FUSE passthrough, kernel 6.9+), which
// an agentfs mount cannot use. The mount and the loopbacks are served by
// separate processes (agentfs mount -d, agentfs loopback, and this program
// re-executed as "mountperf serve-loopback SRC MNT"), never by the process
// that runs the workloads.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agentfs/agentfs/fs/control"
)

type target struct {
	name   string
	dir    string // where the workloads run
	stop   func() error
	client *control.Client // agentfs only
}

type phase struct {
	workload, name string
	times          map[string][]time.Duration // per target
	bytes          int64                      // for throughput, 0 if none
	ops            map[string]int64           // agentfs requests in the last run
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "serve-loopback" {
		if err := serveLoopback(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "mountperf serve-loopback:", err)
			os.Exit(1)
		}
		return
	}
	var (
		bin      = flag.String("agentfs", "bin/agentfs", "agentfs binary")
		work     = flag.String("workdir", "/var/tmp/agentfs-perf", "scratch directory on the disk under test (emptied)")
		repeats  = flag.Int("repeats", 3, "runs of every workload on every target")
		files    = flag.Int("files", 10000, "files of the smallfiles workload")
		gitFiles = flag.Int("git-files", 5000, "files of the git repository")
		seqSize  = flag.Int64("seq-mib", 1024, "MiB of the sequential workloads")
		only     = flag.String("workloads", "smallfiles,git-status,seq", "comma-separated workloads")
		mountArg = flag.String("mount-args", "", "extra flags for agentfs mount, space-separated")
	)
	flag.Parse()
	if err := run(*bin, *work, *repeats, *files, *gitFiles, *seqSize<<20, strings.Split(*only, ","), strings.Fields(*mountArg)); err != nil {
		fmt.Fprintln(os.Stderr, "mountperf:", err)
		os.Exit(1)
	}
}

func run(bin, work string, repeats, files, gitFiles int, seqBytes int64, workloads, mountArgs []string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	for _, d := range []string{"plain", "loopback-src", "loopback", "looppt-src", "looppt", "agentfs", "store", "cache"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return err
		}
	}
	plain := &target{name: "plain", dir: filepath.Join(work, "plain"), stop: func() error { return nil }}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	loop, err := startLoopback("loopback", []string{self, "serve-loopback"}, filepath.Join(work, "loopback-src"), filepath.Join(work, "loopback"))
	if err != nil {
		return err
	}
	defer func() { _ = loop.stop() }()
	looppt, err := startLoopback("loopback-pt", []string{bin, "loopback"}, filepath.Join(work, "looppt-src"), filepath.Join(work, "looppt"))
	if err != nil {
		return err
	}
	defer func() { _ = looppt.stop() }()
	ag, err := startAgentfs(bin, work, mountArgs)
	if err != nil {
		return err
	}
	defer func() { _ = ag.stop() }()
	targets := []*target{plain, looppt, loop, ag}
	if c, err := control.Find(context.Background(), ag.dir); err == nil {
		ag.client = c
	} else {
		return err
	}
	fmt.Fprintf(os.Stderr, "kernel %s, %d repeats; cold reads: %s\n", kernel(), repeats, coldMode())

	var phases []*phase
	get := func(w, n string, b int64) *phase {
		for _, p := range phases {
			if p.workload == w && p.name == n {
				return p
			}
		}
		p := &phase{workload: w, name: n, times: map[string][]time.Duration{}, bytes: b}
		phases = append(phases, p)
		return p
	}
	for r := range repeats {
		order := slices.Clone(targets)
		for range r % len(order) {
			order = append(order[1:], order[0])
		}
		for _, w := range workloads {
			for _, t := range order {
				probe = t.client //nolint:ineffassign // a package variable opCounts reads during runWorkload
				res, err := runWorkload(w, t.dir, r, files, gitFiles, seqBytes)
				probe = nil
				if err != nil {
					return fmt.Errorf("%s on %s: %w", w, t.name, err)
				}
				for _, x := range res {
					p := get(w, x.name, x.bytes)
					p.times[t.name] = append(p.times[t.name], x.d)
					if x.ops != nil {
						p.ops = x.ops
					}
				}
				fmt.Fprintf(os.Stderr, "repeat %d: %s on %s done\n", r+1, w, t.name)
			}
		}
	}
	report(os.Stdout, phases, targets)
	for _, t := range []*target{ag, loop, looppt} {
		if err := t.stop(); err != nil {
			return fmt.Errorf("stopping %s: %w", t.name, err)
		}
	}
	return nil
}

type result struct {
	name  string
	d     time.Duration
	bytes int64
	ops   map[string]int64 // FUSE requests the agentfs mount served in the phase
}

// probe, when not nil, is the control client of the agentfs mount the
// current workload runs in: timed records the requests of each phase.
var probe *control.Client

func opCounts() map[string]int64 {
	if probe == nil {
		return nil
	}
	st, err := probe.Status(context.Background())
	if err != nil {
		return nil
	}
	m := map[string]int64{}
	for _, o := range st.FUSE {
		m[o.Op] = o.Calls
		m[o.Op+" µs"] = int64(o.Time / time.Microsecond)
	}
	return m
}

func timed(name string, bytes int64, f func() error) (result, error) {
	before := opCounts()
	start := time.Now()
	err := f()
	r := result{name: name, d: time.Since(start), bytes: bytes}
	if after := opCounts(); after != nil {
		r.ops = map[string]int64{}
		for k, v := range after {
			if d := v - before[k]; d > 0 {
				r.ops[k] = d
			}
		}
	}
	return r, err
}

func runWorkload(w, base string, rep, files, gitFiles int, seqBytes int64) ([]result, error) {
	dir := filepath.Join(base, fmt.Sprintf("%s-%d", w, rep))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	switch w {
	case "smallfiles":
		return smallFiles(dir, files)
	case "git-status":
		return gitStatus(dir, gitFiles)
	case "seq":
		return sequential(dir, seqBytes)
	}
	return nil, fmt.Errorf("unknown workload %q", w)
}

func smallFiles(dir string, n int) ([]result, error) {
	data := bytes.Repeat([]byte("agentfs!"), 512) // 4 KiB
	path := func(i int) string { return filepath.Join(dir, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d", i)) }
	var out []result
	r, err := timed("create", 0, func() error {
		for i := range n {
			if i%100 == 0 {
				if err := os.Mkdir(filepath.Dir(path(i)), 0o755); err != nil {
					return err
				}
			}
			if err := os.WriteFile(path(i), data, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	r, err = timed("stat", 0, func() error {
		for i := range n {
			if _, err := os.Lstat(path(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	buf := make([]byte, 8192)
	r, err = timed("read", int64(n)*4096, func() error {
		for i := range n {
			f, err := os.Open(path(i))
			if err != nil {
				return err
			}
			c, err := io.ReadFull(f, buf)
			f.Close()
			if c != 4096 || !errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("read %s: %d bytes: %w", path(i), c, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out = append(out, r)
	r, err = timed("delete", 0, func() error {
		for i := range n {
			if err := os.Remove(path(i)); err != nil {
				return err
			}
		}
		return nil
	})
	return append(out, r), err
}

func gitStatus(dir string, n int) ([]result, error) {
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("pkg%02d", i/250), fmt.Sprintf("sub%d", i%5), fmt.Sprintf("file%05d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("package p\n\n// file %d\nvar X%d = %d\n", i, i, i)), 0o644); err != nil {
			return nil, err
		}
	}
	git := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-c", "user.email=perf@agentfs", "-c", "user.name=perf", "-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %v: %w\n%s", args, err, out)
		}
		return nil
	}
	for _, a := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "tree"}, {"status", "--porcelain"}} {
		if err := git(a...); err != nil {
			return nil, err
		}
	}
	var ds []time.Duration
	var last result
	for range 5 {
		r, err := timed("git status", 0, func() error { return git("status", "--porcelain") })
		if err != nil {
			return nil, err
		}
		ds = append(ds, r.d)
		last = r
	}
	last.d = median(ds)
	return []result{last}, nil
}

func sequential(dir string, size int64) ([]result, error) {
	p := filepath.Join(dir, "big")
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + i>>9)
	}
	w, err := timed("write+fsync", size, func() error {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		for off := int64(0); off < size; off += int64(len(buf)) {
			if _, err := f.Write(buf); err != nil {
				f.Close()
				return err
			}
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	if err != nil {
		return nil, err
	}
	out := []result{w}
	if probe != nil {
		// An agentfs mount uploads what was written in the background
		// (every checkpoint interval). Its upload would compete with the
		// cold read for the disk and the CPUs, so it is finished, and
		// timed, first: the read measures data at rest, as the loopback's
		// does after its fsync.
		c := probe
		s, err := timed("sync (upload)", size, func() error { return c.Sync(context.Background()) })
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if err := dropCaches(p); err != nil {
		return nil, err
	}
	r, err := timed("cold read", size, func() error {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		var n int64
		for {
			c, err := f.Read(buf)
			n += int64(c)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		if n != size {
			return fmt.Errorf("read %d bytes of %d", n, size)
		}
		return nil
	})
	return append(out, r), err
}

// dropCaches empties the page cache (and dentries and inodes) as root;
// otherwise it only asks the kernel to drop path's pages.
func dropCaches(path string) error {
	if os.Geteuid() == 0 {
		syscall.Sync()
		return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return fadviseDontNeed(f)
}

func coldMode() string {
	if os.Geteuid() == 0 {
		return "drop_caches (page cache, dentries, inodes)"
	}
	return "fadvise DONTNEED of the file (not root)"
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func report(w io.Writer, phases []*phase, targets []*target) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintf(tw, "workload\tphase\t")
	for _, t := range targets {
		_, _ = fmt.Fprintf(tw, "%s\t", t.name)
	}
	_, _ = fmt.Fprintf(tw, "agentfs/loopback\tagentfs/loopback-pt\t\n")
	for _, p := range phases {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t", p.workload, p.name)
		med := map[string]time.Duration{}
		for _, t := range targets {
			if len(p.times[t.name]) == 0 {
				_, _ = fmt.Fprintf(tw, "-\t")
				continue
			}
			d := median(p.times[t.name])
			med[t.name] = d
			cell := d.Round(time.Millisecond).String()
			if d < 100*time.Millisecond {
				cell = d.Round(100 * time.Microsecond).String()
			}
			if p.bytes > 0 {
				cell += fmt.Sprintf(" (%.0f MiB/s)", float64(p.bytes)/(1<<20)/d.Seconds())
			}
			if ts := p.times[t.name]; len(ts) > 1 && d > 0 {
				cell += fmt.Sprintf(" ±%.0f%%", 100*float64(slices.Max(ts)-slices.Min(ts))/float64(d))
			}
			_, _ = fmt.Fprintf(tw, "%s\t", cell)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t\n", ratioCell(med["agentfs"], med["loopback"]), ratioCell(med["agentfs"], med["loopback-pt"]))
	}
	_ = tw.Flush()
	_, _ = fmt.Fprintln(w, "cells: median time over the repeats (throughput of the median), ±spread = (max-min)/median of the repeats' times")
	_, _ = fmt.Fprintln(w, "ratios are of median times: below 1.00x agentfs is faster (for MiB/s, 1/ratio is the throughput ratio)")
	_, _ = fmt.Fprintln(w, "\nFUSE requests the agentfs mount served per phase (last repeat):")
	for _, p := range phases {
		var keys []string
		for k := range p.ops {
			if !strings.HasSuffix(k, " µs") {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d (%dµs)", k, p.ops[k], p.ops[k+" µs"]/max(p.ops[k], 1)))
		}
		_, _ = fmt.Fprintf(w, "  %s/%s: %s\n", p.workload, p.name, strings.Join(parts, ", "))
	}
}

// ratioCell is a/b as a table cell, "-" when either is missing.
func ratioCell(a, b time.Duration) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

// startLoopback serves a loopback of src on mnt by running argv SRC MNT
// in its own process.
func startLoopback(name string, argv []string, src, mnt string) (*target, error) {
	cmd := exec.Command(argv[0], append(argv[1:], src, mnt)...)
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if err := waitMounted(mnt, 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("loopback: %w\n%s", err, stderr.String())
	}
	stopped := false
	return &target{name: name, dir: mnt, stop: func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			return errors.New("loopback server did not exit")
		}
	}}, nil
}

var pidRE = regexp.MustCompile(`server pid (\d+)`)

// startAgentfs initializes a file:// store in work/store and mounts it
// with `agentfs mount -d` on work/agentfs.
func startAgentfs(bin, work string, extra []string) (*target, error) {
	url := "file://" + filepath.Join(work, "store")
	mnt := filepath.Join(work, "agentfs")
	if out, err := exec.Command(bin, "init", url).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("agentfs init: %w\n%s", err, out)
	}
	args := append([]string{"mount", "-d", "--cache-dir", filepath.Join(work, "cache")}, extra...)
	args = append(args, url, mnt)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("agentfs mount: %w\n%s", err, out)
	}
	m := pidRE.FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("agentfs mount: no server pid in %q", out)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	stopped := false
	return &target{name: "agentfs", dir: mnt, stop: func() error {
		if stopped {
			return nil
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, "umount", "--force", mnt).CombinedOutput()
		if err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("agentfs umount: %w\n%s", err, out)
		}
		return nil
	}}, nil
}

// waitMounted waits until dir is a FUSE mount point.
func waitMounted(dir string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && f[4] == dir {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not become a mount point within %s", dir, d)
}
