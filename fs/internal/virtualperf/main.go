// Command virtualperf measures virtual mounts (issue 8's performance
// targets), each against a baseline measured in the same run over the
// same disk; scripts/virtual-perf.sh builds and runs it.
//
//   - read: cold sequential reads (1 MiB) of untouched files of a host
//     directory — 8 files of 64 MiB, then 2,000 files of 16 KiB — through a
//     virtual mount over it and through go-fuse's loopback of it (FUSE
//     passthrough disabled: its data flows through the server, as a virtual
//     mount's must). Target: at least 0.9x loopback's throughput.
//   - git-status: `git status` in a committed 5,000-file repository, in a
//     virtual mount over it and in a normal agentfs mount holding a copy
//     (median of 5 runs after a warm-up). Target: no slower than normal.
//   - diff: `agentfs diff` right after rewriting 10 files in 10
//     directories of a 50,000-file host directory, against the same in a
//     500-file one (the cost should follow the change, not the base).
//     Target: at most 100 ms.
//
// Cold reads drop the files' pages with fadvise, on the mount and on the
// host directory. The servers run in their own processes (agentfs mount -d,
// and this program re-executed as "virtualperf serve-loopback SRC MNT").
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
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/loopback"
)

func main() {
	if len(os.Args) == 4 && os.Args[1] == "serve-loopback" {
		if err := serveLoopback(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "virtualperf serve-loopback:", err)
			os.Exit(1)
		}
		return
	}
	var (
		bin      = flag.String("agentfs", "bin/agentfs", "agentfs binary")
		work     = flag.String("workdir", "/var/tmp/agentfs-virtual-perf", "scratch directory on the disk under test (emptied)")
		repeats  = flag.Int("repeats", 3, "runs of every measurement")
		only     = flag.String("workloads", "read,git-status,diff", "comma-separated workloads")
		bigFiles = flag.Int("diff-files", 50000, "files of the large base of the diff workload")
	)
	flag.Parse()
	p := &perf{repeats: *repeats}
	var err error
	if p.bin, err = filepath.Abs(*bin); err == nil {
		err = p.run(*work, strings.Split(*only, ","), *bigFiles)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "virtualperf:", err)
		os.Exit(1)
	}
}

type perf struct {
	bin     string
	repeats int
	stops   []func()
}

func (p *perf) run(work string, workloads []string, bigFiles int) error {
	defer func() {
		for i := len(p.stops) - 1; i >= 0; i-- {
			p.stops[i]()
		}
	}()
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	url := "file://" + filepath.Join(work, "store")
	if out, err := exec.Command(p.bin, "init", url).CombinedOutput(); err != nil {
		return fmt.Errorf("agentfs init: %w\n%s", err, out)
	}
	var uname unix.Utsname
	_ = unix.Uname(&uname)
	fmt.Printf("kernel %s, %d repeats\n", unix.ByteSliceToString(uname.Release[:]), p.repeats)
	for _, w := range workloads {
		var err error
		switch w {
		case "read":
			err = p.read(work, url)
		case "git-status":
			err = p.gitStatus(work, url)
		case "diff":
			err = p.diff(work, url, bigFiles)
		default:
			err = fmt.Errorf("unknown workload %q", w)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", w, err)
		}
	}
	return nil
}

// mount runs agentfs mount -d with args and registers its unmount.
func (p *perf) mount(url, mnt, cache string, args ...string) error {
	all := append(append([]string{"mount", "-d", "--cache-dir", cache}, args...), url, mnt)
	if out, err := exec.Command(p.bin, all...).CombinedOutput(); err != nil {
		return fmt.Errorf("agentfs %s: %w\n%s", strings.Join(all, " "), err, out)
	}
	p.stops = append(p.stops, func() { _ = exec.Command(p.bin, "umount", mnt).Run() })
	return nil
}

// loopback serves go-fuse's loopback of src on mnt from a child process.
func (p *perf) loopback(src, mnt string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	cmd := exec.Command(self, "serve-loopback", src, mnt)
	cmd.Dir = "/"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var st, parent unix.Stat_t
		if unix.Stat(mnt, &st) == nil && unix.Stat(filepath.Dir(mnt), &parent) == nil && st.Dev != parent.Dev {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return fmt.Errorf("loopback on %s did not come up\n%s", mnt, stderr.String())
		}
	}
	p.stops = append(p.stops, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	return nil
}

// serveLoopback serves go-fuse's loopback of src on mnt, without FUSE
// passthrough, with 1s entry and attribute timeouts, until SIGTERM or
// SIGINT (see loopback.Serve).
func serveLoopback(src, mnt string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sec := time.Second
	return loopback.Serve(ctx, src, mnt, &gofs.Options{
		MountOptions: fuse.MountOptions{FsName: src, Name: "loopback", DisabledCapabilities: fuse.CAP_PASSTHROUGH},
		AttrTimeout:  &sec, EntryTimeout: &sec,
	}, nil)
}

// fill writes n files of size bytes (distinct contents) into dir/name-i,
// per files per directory.
func fill(dir string, n, per int, size int64) error {
	buf := make([]byte, size)
	for i := range n {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i/per))
		if i%per == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		for j := 0; j+8 <= len(buf); j += 4096 {
			copy(buf[j:], fmt.Sprintf("%08x", i*31+j))
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.txt", i)), buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readTree reads every regular file below dir in 1 MiB reads, dropping
// its pages first (and those of the same file below also, the host
// directory behind the mount), and returns the bytes read and the time
// the reads took.
func readTree(dir, also string) (int64, time.Duration, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	for _, f := range files {
		for _, p := range []string{f, filepath.Join(also, strings.TrimPrefix(f, dir))} {
			if fh, err := os.Open(p); err == nil {
				_ = unix.Fadvise(int(fh.Fd()), 0, 0, unix.FADV_DONTNEED)
				_ = fh.Close()
			}
		}
	}
	buf := make([]byte, 1<<20)
	var total int64
	start := time.Now()
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return total, 0, err
		}
		for {
			n, err := fh.Read(buf)
			total += int64(n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = fh.Close()
				return total, 0, err
			}
		}
		_ = fh.Close()
	}
	return total, time.Since(start), nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func spread(ds []time.Duration) string {
	return fmt.Sprintf("%v..%v", slices.Min(ds).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
}

func (p *perf) read(work, url string) error {
	host := filepath.Join(work, "read-host")
	if err := fill(filepath.Join(host, "big"), 8, 8, 64<<20); err != nil {
		return err
	}
	if err := fill(filepath.Join(host, "small"), 2000, 100, 16<<10); err != nil {
		return err
	}
	loop, virt := filepath.Join(work, "read-loopback"), filepath.Join(work, "read-virtual")
	if err := p.loopback(host, loop); err != nil {
		return err
	}
	if err := p.mount(url, virt, filepath.Join(work, "read-cache"), "--virtual", "--base", host); err != nil {
		return err
	}
	fmt.Println("\nread: cold 1 MiB reads of untouched host files (MiB/s, median of the repeats)")
	for _, part := range []string{"big", "small"} {
		times := map[string][]time.Duration{}
		var bytes int64
		for r := range p.repeats {
			order := []string{"loopback", "virtual"}
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, t := range order {
				dir := map[string]string{"loopback": loop, "virtual": virt}[t]
				n, d, err := readTree(filepath.Join(dir, part), filepath.Join(host, part))
				if err != nil {
					return err
				}
				times[t] = append(times[t], d)
				bytes = n
			}
		}
		mibs := func(t string) float64 { return float64(bytes) / (1 << 20) / median(times[t]).Seconds() }
		fmt.Printf("  %-6s %6.0f MiB total   loopback %7.1f MiB/s (%s)   virtual %7.1f MiB/s (%s)   virtual/loopback %.2fx (target >= 0.9x)\n",
			part, float64(bytes)/(1<<20), mibs("loopback"), spread(times["loopback"]), mibs("virtual"), spread(times["virtual"]), mibs("virtual")/mibs("loopback"))
	}
	return nil
}

// git runs git in dir.
func git(dir string, args ...string) error {
	cmd := exec.Command("git", append([]string{"-c", "user.email=perf@agentfs", "-c", "user.name=perf"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (p *perf) gitStatus(work, url string) error {
	host := filepath.Join(work, "git-host")
	if err := fill(host, 5000, 100, 2048); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "5000 files"}} {
		if err := git(host, args...); err != nil {
			return err
		}
	}
	normal, virt := filepath.Join(work, "git-normal"), filepath.Join(work, "git-virtual")
	if err := p.mount(url, normal, filepath.Join(work, "git-normal-cache")); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", host+"/.", normal).CombinedOutput(); err != nil {
		return fmt.Errorf("cp: %w\n%s", err, out)
	}
	if err := p.mount(url, virt, filepath.Join(work, "git-virtual-cache"), "--virtual", "--base", host); err != nil {
		return err
	}
	fmt.Println("\ngit-status: `git status` in a committed 5,000-file repository (median of 15 interleaved runs after a warm-up, per repeat)")
	times := map[string][]time.Duration{}
	for _, dir := range []string{normal, virt} {
		if err := git(dir, "status", "--porcelain"); err != nil {
			return err
		}
	}
	for range p.repeats {
		runs := map[string][]time.Duration{}
		for i := range 15 {
			order := []string{"normal", "virtual"}
			if i%2 == 1 {
				slices.Reverse(order)
			}
			for _, t := range order {
				start := time.Now()
				if err := git(map[string]string{"normal": normal, "virtual": virt}[t], "status", "--porcelain"); err != nil {
					return err
				}
				runs[t] = append(runs[t], time.Since(start))
			}
		}
		for t, r := range runs {
			times[t] = append(times[t], median(r))
		}
	}
	n, v := median(times["normal"]), median(times["virtual"])
	fmt.Printf("  normal mount %v (%s)   virtual mount %v (%s)   virtual/normal %.2fx (target <= 1.0x)\n",
		n.Round(100*time.Microsecond), spread(times["normal"]), v.Round(100*time.Microsecond), spread(times["virtual"]), v.Seconds()/n.Seconds())
	return nil
}

func (p *perf) diff(work, url string, bigFiles int) error {
	fmt.Printf("\ndiff: `agentfs diff` (and the control call alone) right after rewriting 10 files in 10 directories\n")
	res := map[int][2]time.Duration{}
	for _, files := range []int{500, bigFiles} {
		host := filepath.Join(work, fmt.Sprintf("diff-host-%d", files))
		if err := fill(host, files, 100, 100); err != nil {
			return err
		}
		mnt := filepath.Join(work, fmt.Sprintf("diff-virtual-%d", files))
		if err := p.mount(url, mnt, filepath.Join(work, fmt.Sprintf("diff-cache-%d", files)), "--virtual", "--base", host); err != nil {
			return err
		}
		c, err := control.Find(context.Background(), mnt)
		if err != nil {
			return err
		}
		var cli, call []time.Duration
		for r := range max(p.repeats, 5) {
			rewrite := func() error {
				for i := range 10 {
					f := filepath.Join(mnt, fmt.Sprintf("d%03d", i*(files/100)/10), fmt.Sprintf("f%05d.txt", i*(files/10)))
					if err := os.WriteFile(f, []byte(fmt.Sprintf("rewritten %d\n", r)), 0o644); err != nil {
						return err
					}
				}
				return nil
			}
			if err := rewrite(); err != nil {
				return err
			}
			start := time.Now()
			out, err := exec.Command(p.bin, "diff", mnt).CombinedOutput()
			if err != nil {
				return fmt.Errorf("agentfs diff: %w\n%s", err, out)
			}
			cli = append(cli, time.Since(start))
			if got := strings.Count(string(out), "\n"); got != 10 {
				return fmt.Errorf("agentfs diff listed %d changes, want 10:\n%s", got, out)
			}
			if err := rewrite(); err != nil {
				return err
			}
			start = time.Now()
			if _, err := c.VirtualDiff(context.Background(), control.VirtualDiffRequest{}); err != nil {
				return err
			}
			call = append(call, time.Since(start))
		}
		res[files] = [2]time.Duration{median(cli), median(call)}
		fmt.Printf("  %6d-file base: agentfs diff %v (%s), control call %v (%s)\n", files,
			median(cli).Round(100*time.Microsecond), spread(cli), median(call).Round(100*time.Microsecond), spread(call))
	}
	big, small := res[bigFiles], res[500]
	fmt.Printf("  %d files vs 500: %.2fx (agentfs diff), %.2fx (control call); target: agentfs diff <= 100 ms\n",
		bigFiles, big[0].Seconds()/small[0].Seconds(), big[1].Seconds()/small[1].Seconds())
	return nil
}
