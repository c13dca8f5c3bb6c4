package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

func tinyObjConfig() ObjConfig {
	c := QuickObjConfig()
	c.Sizes = []int64{1 << 10, 64 << 10}
	c.Concurrency = []int{1, 4}
	c.BytesPerCell = 256 << 10
	c.MaxObjects = 16
	c.MaxInflight = 128 << 10
	c.ListPage = 10
	return c
}

func openStore(t *testing.T, url string) *blobstore.Store {
	t.Helper()
	st, err := blobstore.Open(context.Background(), url, blobstore.Options{MaxConcurrency: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close %s: %v", url, err)
		}
	})
	return st
}

func countObjects(t *testing.T, st *blobstore.Store) int {
	t.Helper()
	n := 0
	if err := st.Walk(context.Background(), "", func(blobstore.ObjectInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRunObj(t *testing.T) {
	for _, url := range []string{"mem://objbench-test", "file://" + t.TempDir()} {
		t.Run(url[:4], func(t *testing.T) {
			st := openStore(t, url)
			if err := st.Put(context.Background(), "unrelated/keep", []byte("x")); err != nil {
				t.Fatal(err)
			}
			cfg := tinyObjConfig()
			var progress []ObjProgress
			cfg.Progress = func(p ObjProgress) { progress = append(progress, p) }
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rep, err := RunObj(ctx, st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			// 64 KiB × 4 exceeds 128 KiB in flight.
			if len(rep.Cells) != 3 || len(rep.Skipped) != 1 || rep.Skipped[0].Size != 64<<10 || rep.Skipped[0].Concurrency != 4 {
				t.Fatalf("cells %d, skipped %+v", len(rep.Cells), rep.Skipped)
			}
			for _, c := range rep.Cells {
				if c.Objects != cfg.Objects(c.Size, c.Concurrency) || len(c.Ops) != len(ObjOps()) {
					t.Errorf("cell %+v", c)
				}
				for i, o := range c.Ops {
					if o.Op != ObjOps()[i] || o.Ops <= 0 || o.Latency.N != int(o.Ops) || o.OpsPerSec <= 0 {
						t.Errorf("cell %s/%d op %+v", fmtSize(c.Size), c.Concurrency, o)
					}
				}
				put, _ := c.Op(ObjPut)
				get, _ := c.Op(ObjGet)
				if put.Bytes != int64(c.Objects)*c.Size || get.Bytes != put.Bytes {
					t.Errorf("cell %s/%d: put %d bytes, get %d", fmtSize(c.Size), c.Concurrency, put.Bytes, get.Bytes)
				}
				wantRace := 0
				if c.Size == 1<<10 && c.Concurrency > 1 {
					wantRace = 1
				}
				if c.RaceWinners != wantRace {
					t.Errorf("cell %s/%d: race winners %d, want %d", fmtSize(c.Size), c.Concurrency, c.RaceWinners, wantRace)
				}
			}
			if rep.Cleaned != 1 { // the race key
				t.Errorf("cleaned %d leftover objects, want 1", rep.Cleaned)
			}
			if n := countObjects(t, st.Sub(rep.Prefix)); n != 0 {
				t.Errorf("%d objects left under %s", n, rep.Prefix)
			}
			if _, err := st.Stat(context.Background(), "unrelated/keep"); err != nil {
				t.Errorf("objbench touched an object outside its prefix: %v", err)
			}
			if len(progress) != 3*len(ObjOps()) || progress[0].Cells != 3 {
				t.Errorf("%d progress calls: %+v", len(progress), progress)
			}
			if url[:4] == "file" {
				ents, err := os.ReadDir(url[len("file://"):])
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ents {
					if e.IsDir() && e.Name() != "unrelated" {
						t.Errorf("directory %s left behind", e.Name())
					}
				}
			}
		})
	}
}

func TestObjbenchRefusesAVolume(t *testing.T) {
	st := openStore(t, "mem://objbench-volume")
	if err := st.Put(context.Background(), VolumeKey, []byte(`{"format":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := RunObj(context.Background(), st, tinyObjConfig())
	if !errors.Is(err, ErrVolume) {
		t.Fatalf("RunObj on a volume = %v, want ErrVolume", err)
	}
	if n := countObjects(t, st); n != 1 {
		t.Errorf("objbench wrote to a volume: %d objects", n)
	}
}

func TestObjbenchRefusesABusyPrefix(t *testing.T) {
	st := openStore(t, "mem://objbench-busy")
	if err := st.Put(context.Background(), "mine/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	cfg := tinyObjConfig()
	cfg.Prefix = "mine"
	if _, err := RunObj(context.Background(), st, cfg); err == nil {
		t.Fatal("RunObj ran in a prefix that holds objects")
	}
	if n := countObjects(t, st); n != 1 {
		t.Errorf("%d objects, want the 1 that was there", n)
	}
}

func TestObjbenchCleansUpAfterCancel(t *testing.T) {
	st := openStore(t, "mem://objbench-cancel")
	ctx, cancel := context.WithCancel(context.Background())
	cfg := tinyObjConfig()
	cfg.Progress = func(p ObjProgress) {
		if p.Op == ObjGet {
			cancel() // objects exist now; the run must still remove them
		}
	}
	cfg.Prefix = "cancelled-run"
	rep, err := RunObj(ctx, st, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunObj after cancel = %v", err)
	}
	if rep == nil || rep.Cleaned == 0 {
		t.Errorf("report %+v: expected cleaned objects", rep)
	}
	if n := countObjects(t, st.Sub("cancelled-run")); n != 0 {
		t.Errorf("%d objects left after a cancelled run", n)
	}
}

func TestObjConfig(t *testing.T) {
	c := DefaultObjConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		size int64
		conc int
		want int
	}{
		{4 << 10, 1, 256},  // capped by MaxObjects
		{16 << 20, 1, 8},   // BytesPerCell / size
		{64 << 20, 16, 16}, // at least one per worker
		{0, 1, 256},
	}
	for _, k := range cases {
		if got := c.Objects(k.size, k.conc); got != k.want {
			t.Errorf("Objects(%d, %d) = %d, want %d", k.size, k.conc, got, k.want)
		}
	}
	for i, bad := range []ObjConfig{{}, {Sizes: []int64{1}, Concurrency: []int{0}, MaxObjects: 1, ListPage: 1}, {Sizes: []int64{-1}, Concurrency: []int{1}, MaxObjects: 1, ListPage: 1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("config %d accepted: %+v", i, bad)
		}
	}
}

func TestRemoveEmptyFileDirs(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "pre")
	if err := os.MkdirAll(filepath.Join(p, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeEmptyFileDirs("file://" + p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there: %v", p, err)
	}
	if err := os.MkdirAll(filepath.Join(p, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "c", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeEmptyFileDirs("file://" + p); err == nil {
		t.Error("a directory holding a file was reported removed")
	}
	if err := removeEmptyFileDirs("mem://x"); err != nil {
		t.Errorf("mem:// store: %v", err)
	}
	if err := removeEmptyFileDirs(fmt.Sprintf("file://%s/missing", root)); err != nil {
		t.Errorf("missing directory: %v", err)
	}
}
