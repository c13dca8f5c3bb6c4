package bench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/testenv"
)

// tinyParams are smaller than QuickParams, for tests that run workloads
// many times. Caches are dropped with fadvise, which touches only the
// workload's own files (drop_caches would slow down everything else on the
// machine).
func tinyParams() Params {
	p := QuickParams()
	p.BigFileSize, p.RandFileSize, p.RandOps = 2<<20, 1<<20, 64
	p.SmallFiles, p.MetaOps, p.ReaddirEntries, p.ReaddirRepeats = 40, 30, 50, 2
	p.GitFiles, p.GitStatusRepeats, p.NodePackages, p.EditFiles, p.TreeFiles = 60, 2, 3, 20, 60
	p.Cold = ColdFadvise
	return p
}

func TestWorkloadsQuick(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git (the git workload)", err)
	}
	p := QuickParams()
	p.Cold = ColdFadvise
	for _, w := range Workloads() {
		t.Run(w.Name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			samples, err := RunWorkload(ctx, w, dir, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(samples) != len(w.Phases) {
				t.Fatalf("%d samples for %d phases", len(samples), len(w.Phases))
			}
			for i, s := range samples {
				if s.Phase != w.Phases[i].Name || s.Ops <= 0 || s.Elapsed <= 0 {
					t.Errorf("phase %d: %+v", i, s)
				}
				if len(s.Latencies) != 0 && int64(len(s.Latencies)) != s.Ops {
					t.Errorf("phase %s: %d latencies for %d ops", s.Phase, len(s.Latencies), s.Ops)
				}
			}
			checkWorkloadEffects(t, w.Name, p, dir, samples)
		})
	}
}

// checkWorkloadEffects checks what each workload must have done.
func checkWorkloadEffects(t *testing.T, name string, p Params, dir string, s []Sample) {
	t.Helper()
	byPhase := map[string]Sample{}
	for _, x := range s {
		byPhase[x.Phase] = x
	}
	switch name {
	case "bigfile":
		want := p.BigFileSize * int64(p.Threads)
		if byPhase["write"].Bytes != want || byPhase["read"].Bytes != want {
			t.Errorf("bigfile moved %d/%d bytes, want %d", byPhase["write"].Bytes, byPhase["read"].Bytes, want)
		}
		if byPhase["read"].Cold != noteFadvise || byPhase["write"].Cold != "" {
			t.Errorf("cold notes: write %q, read %q", byPhase["write"].Cold, byPhase["read"].Cold)
		}
	case "random":
		for _, ph := range []string{"randread", "randread-direct", "randwrite"} {
			if got := byPhase[ph]; got.Ops != int64(p.RandOps) || got.Bytes != int64(p.RandOps)*4096 {
				t.Errorf("%s: %d ops, %d bytes; want %d ops of 4 KiB", ph, got.Ops, got.Bytes, p.RandOps)
			}
		}
	case "smallfiles":
		for _, ph := range []string{"create", "stat", "read", "delete"} {
			if byPhase[ph].Ops != int64(p.SmallFiles) {
				t.Errorf("%s: %d ops, want %d", ph, byPhase[ph].Ops, p.SmallFiles)
			}
		}
		assertNoFiles(t, dir)
	case "metadata":
		if byPhase["readdir"].Ops != int64(p.ReaddirRepeats) || byPhase["rename-dir"].Ops != int64(p.MetaOps) {
			t.Errorf("metadata ops: %+v", byPhase)
		}
	case "git":
		if byPhase["add"].Ops != int64(p.GitFiles) || byPhase["commit"].Ops != int64(p.GitFiles) || byPhase["status"].Ops != int64(p.GitStatusRepeats) {
			t.Errorf("git ops: add %d, commit %d, status %d", byPhase["add"].Ops, byPhase["commit"].Ops, byPhase["status"].Ops)
		}
		out, err := gitCmd(context.Background(), dir, "rev-list", "--count", "HEAD")
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			t.Errorf("git rev-list: %q, %v", out, err)
		}
	case "node_modules":
		if byPhase["unpack"].Ops < int64(p.NodePackages)*10 {
			t.Errorf("unpacked only %d entries for %d packages", byPhase["unpack"].Ops, p.NodePackages)
		}
		if _, err := os.Stat(dir + "/node_modules"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("node_modules left behind: %v", err)
		}
	case "tree":
		for _, ph := range []string{"tar-x", "grep-r", "cp-r"} {
			if byPhase[ph].Ops != int64(p.TreeFiles) {
				t.Errorf("%s: %d ops, want %d", ph, byPhase[ph].Ops, p.TreeFiles)
			}
		}
		if byPhase["ls-lR-cold"].Cold != noteNoFiles || byPhase["ls-lR-warm"].Cold != "" {
			t.Errorf("cold notes: cold %q, warm %q", byPhase["ls-lR-cold"].Cold, byPhase["ls-lR-warm"].Cold)
		}
		n := 0
		if err := walkFiles(dir+"/copy", func(string) { n++ }); err != nil || n != p.TreeFiles {
			t.Errorf("cp -r copied %d files (%v), want %d", n, err, p.TreeFiles)
		}
	case "editloop":
		if byPhase["edit"].Ops != int64(p.EditFiles) {
			t.Errorf("edited %d files, want %d", byPhase["edit"].Ops, p.EditFiles)
		}
	default:
		t.Errorf("no checks for workload %q: add them", name)
	}
}

func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	err := walkFiles(dir, func(p string) { t.Errorf("left behind: %s", p) })
	if err != nil {
		t.Fatal(err)
	}
}

func walkFiles(dir string, fn func(string)) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := dir + "/" + e.Name()
		if e.IsDir() {
			if err := walkFiles(p, fn); err != nil {
				return err
			}
			continue
		}
		fn(p)
	}
	return nil
}

func TestEditFileChangesLines(t *testing.T) {
	name := t.TempDir() + "/f.go"
	orig := "a\nb\nc\nd\ne\nf\ng\nh\n"
	if err := os.WriteFile(name, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := editFile(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != n || string(got) == orig || strings.Count(string(got), "by the agent") != 3 {
		t.Errorf("edited file (%d bytes reported):\n%s", n, got)
	}
}

func TestSelectWorkloads(t *testing.T) {
	all, err := SelectWorkloads(nil)
	if err != nil || len(all) != len(Workloads()) {
		t.Fatalf("SelectWorkloads(nil) = %d workloads, %v", len(all), err)
	}
	ws, err := SelectWorkloads([]string{"git", "bigfile"})
	if err != nil || len(ws) != 2 || ws[0].Name != "bigfile" || ws[1].Name != "git" {
		t.Errorf("SelectWorkloads(git, bigfile) = %v, %v", ws, err)
	}
	if _, err := SelectWorkloads([]string{"bigfile", "nosuch"}); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("unknown workload: %v", err)
	}
}

func TestParamsValidate(t *testing.T) {
	for _, p := range []Params{DefaultParams(), QuickParams(), tinyParams()} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	bad := QuickParams()
	bad.Threads = 0
	if err := bad.Validate(); err == nil {
		t.Error("zero threads accepted")
	}
	bad = QuickParams()
	bad.Cold = "lukewarm"
	if err := bad.Validate(); err == nil {
		t.Error("unknown cold mode accepted")
	}
}

func TestDataGenBlocksDiffer(t *testing.T) {
	g := newDataGen(1)
	a, b, a2 := make([]byte, 4096), make([]byte, 4096), make([]byte, 4096)
	g.fill(a, blockKey(0, 1))
	g.fill(b, blockKey(0, 2))
	g.fill(a2, blockKey(0, 1))
	if string(a) == string(b) {
		t.Error("two blocks have the same content")
	}
	if string(a) != string(a2) {
		t.Error("the same block key gave different content")
	}
	odd := make([]byte, 13)
	g.fill(odd, 7) // must not panic on a length that is not a multiple of 8
}

func TestDropCachesModes(t *testing.T) {
	f := t.TempDir() + "/f"
	if err := os.WriteFile(f, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range []ColdMode{ColdNone, ColdFadvise} {
		note, err := dropCaches(m, []string{f})
		if err != nil || note == "" {
			t.Errorf("%s: %q, %v", m, note, err)
		}
	}
	if _, err := dropCaches(ColdFadvise, []string{t.TempDir() + "/missing"}); err == nil {
		t.Error("fadvise of a missing file succeeded")
	}
	if _, err := dropCaches("bogus", nil); err == nil {
		t.Error("unknown mode accepted")
	}
}

// syncRecorder is a Mount that notes, at every Stats call (bench reads the
// counters before and after each phase), how many syncs came before it.
type syncRecorder struct {
	probeDouble
	seen []int
}

func (s *syncRecorder) Stats(ctx context.Context) (MountStats, error) {
	s.mu.Lock()
	s.seen = append(s.seen, s.syncs)
	s.mu.Unlock()
	return s.probeDouble.Stats(ctx)
}

// TestSetupSyncsTheMount checks that in an agentfs mount what a timed
// phase wrote is synced through the mount before the reads that follow are
// timed (ls -lR after tar -x, the bigfile read after its write): the
// kernel passes syncfs to no FUSE server, and without the mount's sync its
// next checkpoint landed in whichever phase ran then.
func TestSetupSyncsTheMount(t *testing.T) {
	for _, w := range []Workload{treeWorkload(), bigFileWorkload()} {
		m := &syncRecorder{}
		if _, err := runWorkload(context.Background(), w, t.TempDir(), tinyParams(), m); err != nil {
			t.Fatal(err)
		}
		// Stats calls: before and after the first (writing) phase, then
		// before the second.
		if len(m.seen) < 3 || m.seen[1] != 0 || m.seen[2] != 1 {
			t.Errorf("%s: syncs seen at each phase's start and end: %v; want none during %s and one before %s",
				w.Name, m.seen, w.Phases[0].Name, w.Phases[1].Name)
		}
	}
}
