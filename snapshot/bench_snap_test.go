package snapshot_test

// Benchmarks on a 50,000-file volume (50 top directories x 10
// subdirectories x 100 files of 200-1,200 distinct bytes each, in 16 MiB
// packs), with 10 commits of history that each change 10 files:
//
//	go test -run '^$' -bench Volume50k -benchtime 20x -timeout 30m ./snapshot/
//
// AGENTFS_BENCH_STORE=file or =minio selects a file:// store or an S3
// bucket on a local MinIO server instead of mem://; AGENTFS_BENCH_LATENCY=20ms
// adds that round-trip time to every store call of the benchmarks. The
// volume is built once (a few seconds) and shared by the sub-benchmarks.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/blobstore/faulty"
	"github.com/agentfs/agentfs/snapshot"
)

const benchFiles = 50000

type benchVol struct {
	v     *vol
	files map[string]fspec
	base  snapshot.Commit // main with 50,000 files
	head  snapshot.Commit // after 10 more commits of 10 changed files each
}

func buildBenchVolume(b *testing.B) *benchVol {
	b.Helper()
	start := time.Now()
	kind := os.Getenv("AGENTFS_BENCH_STORE")
	if kind == "" {
		kind = "mem"
	}
	url := storeURL(b, kind)
	v := newVol(b, url)
	files := make(map[string]fspec, benchFiles)
	for i := range benchFiles {
		p := fmt.Sprintf("top%02d/sub%d/file%03d.txt", i/1000, i/100%10, i%100)
		files[p] = fspec{Data: fmt.Sprintf("%d\n%s", i, randText(uint64(i), 200+i%1000))}
	}
	bv := &benchVol{v: v, files: files}
	bv.base = v.commit("main", files)
	for c := range 10 {
		for k := range 10 {
			i := (c*7919 + k*104729) % benchFiles
			p := fmt.Sprintf("top%02d/sub%d/file%03d.txt", i/1000, i/100%10, i%100)
			files[p] = fspec{Data: fmt.Sprintf("commit %d change %d\n%s", c, k, randText(uint64(1e6+c*10+k), 500))}
		}
		bv.head = v.commit("main", files)
	}
	n, size := packBytes(b, v.store)
	b.Logf("built the %d-file volume (%s) in %v: %d packs, %d MiB", benchFiles, kind, time.Since(start).Round(time.Millisecond), n, size>>20)
	if lat := os.Getenv("AGENTFS_BENCH_LATENCY"); lat != "" {
		// Measure through a store that adds a round-trip time to every
		// call, like a distant S3 or GCS endpoint.
		d, err := time.ParseDuration(lat)
		if err != nil {
			b.Fatalf("AGENTFS_BENCH_LATENCY: %v", err)
		}
		s, err := blobstore.Open(context.Background(), url, blobstore.Options{
			WrapDriver: func(drv blobstore.Driver) blobstore.Driver { return faulty.New(drv, faulty.Options{Latency: d}) }})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		r, err := snapshot.Open(context.Background(), s)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(r.Close)
		v.store, v.r = s, r
		b.Logf("every store call of the benchmarks waits %v more", d)
	}
	return bv
}

// BenchmarkVolume50k runs every benchmark on one 50,000-file volume.
func BenchmarkVolume50k(b *testing.B) {
	bv := buildBenchVolume(b)
	b.Run("snapshot-save", func(b *testing.B) { benchSave(b, bv) })
	b.Run("fork", func(b *testing.B) { benchFork(b, bv) })
	b.Run("diff-10-files", func(b *testing.B) { benchDiff10(b, bv) })
	b.Run("diff-100-files", func(b *testing.B) { benchDiff100(b, bv) })
	b.Run("gc", func(b *testing.B) { benchGC(b, bv) })
	b.Run("fsck", func(b *testing.B) { benchFsck(b, bv, false) })
	b.Run("fsck-full", func(b *testing.B) { benchFsck(b, bv, true) })
	b.Run("list-unique", func(b *testing.B) { benchListUnique(b, bv) })
}

func randText(seed uint64, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \n"
	b := make([]byte, n)
	x := seed*6364136223846793005 + 1442695040888963407
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x%uint64(len(alphabet))]
	}
	return string(b)
}

// peakHeap runs f while sampling the heap in use, and returns the peak
// above what was in use before. The collector runs at GOGC=10 meanwhile,
// so that the peak approximates live memory rather than garbage not yet
// collected.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > base && m.HeapInuse-base > peak.Load() {
				peak.Store(m.HeapInuse - base)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return peak.Load()
}

var benchSeq atomic.Int64

func benchSave(b *testing.B, bv *benchVol) {
	ctx := context.Background()
	var names []string
	b.ResetTimer()
	for b.Loop() {
		name := fmt.Sprintf("bench-save-%d", benchSeq.Add(1))
		if _, err := bv.v.r.SaveSnapshot(ctx, name, snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{}); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	b.StopTimer()
	for _, n := range names {
		if err := bv.v.r.DeleteSnapshot(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
}

func benchFork(b *testing.B, bv *benchVol) {
	ctx := context.Background()
	var names []string
	b.ResetTimer()
	for b.Loop() {
		name := fmt.Sprintf("bench-fork-%d", benchSeq.Add(1))
		if _, err := bv.v.r.Fork(ctx, "main", name, snapshot.ForkOptions{}); err != nil {
			b.Fatal(err)
		}
		names = append(names, name)
	}
	b.StopTimer()
	for _, n := range names {
		if _, err := bv.v.r.DeleteBranch(ctx, n, snapshot.DeleteBranchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDiff10 diffs two commits that differ in 10 files; benchDiff100 the
// first 50,000-file commit with the head (100 files changed).
func benchDiff10(b *testing.B, bv *benchVol) {
	ctx := context.Background()
	prev, err := bv.v.r.ReadCommit(ctx, snapshot.CommitID{Branch: "main", Seq: bv.head.ID.Seq - 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		n := 0
		err := bv.v.r.Diff(ctx, snapshot.CommitTree(prev), snapshot.CommitTree(bv.head), func(snapshot.Change) error { n++; return nil })
		if err != nil || n != 10 {
			b.Fatalf("diff: %d changes, %v", n, err)
		}
	}
}

func benchDiff100(b *testing.B, bv *benchVol) {
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		n := 0
		err := bv.v.r.Diff(ctx, snapshot.CommitTree(bv.base), snapshot.CommitTree(bv.head), func(snapshot.Change) error { n++; return nil })
		if err != nil || n < 90 {
			b.Fatalf("diff: %d changes, %v", n, err)
		}
	}
}

// benchGC runs a dry-run gc (everything but the deletes, so every
// iteration does the same work) that prunes the 10 old commits; it
// reports the peak heap of one run.
func benchGC(b *testing.B, bv *benchVol) {
	ctx := context.Background()
	opts := snapshot.GCOptions{Policy: snapshot.Retention{KeepLast: 1}, DryRun: true, Grace: time.Minute, Now: future(time.Minute)}
	var rep snapshot.GCReport
	peak := peakHeap(func() {
		var err error
		if rep, err = bv.v.r.GC(ctx, opts); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := bv.v.r.GC(ctx, opts); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(rep.BlobsMarked), "blobs-marked")
	b.ReportMetric(float64(rep.TreesRead), "trees-read")
	b.ReportMetric(float64(rep.CommitsPruned), "commits-pruned")
}

func benchFsck(b *testing.B, bv *benchVol, full bool) {
	ctx := context.Background()
	peak := peakHeap(func() {
		rep, err := bv.v.r.Fsck(ctx, snapshot.FsckOptions{Full: full})
		if err != nil || !rep.OK() {
			b.Fatalf("fsck: %v %+v", err, rep.Problems)
		}
	})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := bv.v.r.Fsck(ctx, snapshot.FsckOptions{Full: full}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

func benchListUnique(b *testing.B, bv *benchVol) {
	ctx := context.Background()
	if _, err := bv.v.r.SaveSnapshot(ctx, fmt.Sprintf("bench-list-%d", benchSeq.Add(1)), bv.base.ID, snapshot.SaveOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := bv.v.r.ListSnapshots(ctx, snapshot.ListOptions{Unique: true}); err != nil {
			b.Fatal(err)
		}
	}
}
