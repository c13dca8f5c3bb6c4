package cache

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/snapshot"
)

// Benchmarks of the engine's costs that the issue names. Each reports the
// blob-store PUTs per operation next to the time. Run them on file:// (the
// default) with:
//
//	go test -run XXX -bench . -benchtime 10x ./cache
//
// and on S3 (a local MinIO server, see internal/testservices) with
// AGENTFS_BENCH_STORE=s3 in the environment.

// benchStoreURL returns the URL of a new, empty store for a benchmark's
// volume: a temporary directory, or a fresh bucket on a local MinIO server
// when AGENTFS_BENCH_STORE=s3.
func benchStoreURL(b *testing.B) string {
	switch s := os.Getenv("AGENTFS_BENCH_STORE"); s {
	case "", "file":
		return "file://" + b.TempDir()
	case "s3":
		return testservices.StartMinIO(b)
	default:
		b.Fatalf("AGENTFS_BENCH_STORE=%q: want file or s3", s)
		return ""
	}
}

// populate creates dirs×files small files through the engine and syncs.
func populate(b *testing.B, v *Volume, dirs, files, size int) {
	b.Helper()
	ctx := context.Background()
	data := make([]byte, size)
	for d := 0; d < dirs; d++ {
		da, err := v.Mkdir(ctx, RootIno, fmt.Sprintf("d%04d", d), 0o755, Cred{})
		if err != nil {
			b.Fatal(err)
		}
		for f := 0; f < files; f++ {
			data[0], data[1] = byte(d), byte(f)
			writeFile(b, v, da.Ino, fmt.Sprintf("f%04d.txt", f), data)
		}
	}
	if err := v.Sync(ctx); err != nil {
		b.Fatal(err)
	}
}

func puts(v *Volume) int64 {
	m := v.repo.Store().Metrics()
	return m.Snapshot(blobstore.OpPut).Calls + m.Snapshot(blobstore.OpPutIfAbsent).Calls
}

// BenchmarkCheckpointOneFileIn50k: the cost of a checkpoint after changing
// one file in a 50,000-file tree (500 directories of 100 files).
func BenchmarkCheckpointOneFileIn50k(b *testing.B) {
	url := benchStoreURL(b)
	initVolume(b, url)
	v := openVolume(b, url, "")
	populate(b, v, 500, 100, 64)
	ctx := context.Background()
	d := must[Attr](b)(v.Lookup(ctx, RootIno, "d0250"))
	f := must[Attr](b)(v.Lookup(ctx, d.Ino, "f0050.txt"))
	p0 := puts(v)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.Open(ctx, f.Ino, false); err != nil {
			b.Fatal(err)
		}
		if _, err := v.Write(ctx, f.Ino, []byte(fmt.Sprint(i)), 0); err != nil {
			b.Fatal(err)
		}
		_ = v.Release(ctx, f.Ino)
		if err := v.Sync(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(puts(v)-p0)/float64(b.N), "puts/op")
}

// BenchmarkCheckpoint10kNewFiles: the checkpoint of 10,000 new 4 KiB files
// (the time of the Sync alone, not of the creates), on a plain and on an
// encrypted volume (the cost of sealing and keyed names).
func BenchmarkCheckpoint10kNewFiles(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchCheckpoint10k(b) })
	b.Run("encrypted", func(b *testing.B) { benchCheckpoint10k(b, encrypted) })
}

func benchCheckpoint10k(b *testing.B, cfg ...func(*snapshot.Config)) {
	var cpu int64
	defer func() { b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op") }() // steadier than wall time on a loaded machine
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		url := benchStoreURL(b)
		initVolume(b, url, cfg...)
		v := openVolume(b, url, "")
		ctx := context.Background()
		data := make([]byte, 4096)
		for d := 0; d < 100; d++ {
			da := must[Attr](b)(v.Mkdir(ctx, RootIno, fmt.Sprintf("d%03d", d), 0o755, Cred{}))
			for f := 0; f < 100; f++ {
				data[0], data[1], data[2] = byte(d), byte(f), byte(i)
				writeFile(b, v, da.Ino, fmt.Sprintf("f%03d", f), data)
			}
		}
		p0 := puts(v)
		b.StartTimer()
		c0 := testenv.CPUTime()
		if err := v.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		cpu += testenv.CPUTime() - c0
		b.StopTimer()
		b.ReportMetric(float64(puts(v)-p0), "puts/op")
		_ = v.Close(ctx)
	}
}

// BenchmarkOpen100k: opening a 100,000-file volume from a fresh cache
// directory, up to the first lookup of a file.
func BenchmarkOpen100k(b *testing.B) {
	url := benchStoreURL(b)
	initVolume(b, url)
	v := openVolume(b, url, "")
	populate(b, v, 1000, 100, 16)
	ctx := context.Background()
	if err := v.Close(ctx); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		w := openVolume(b, url, "")
		d := must[Attr](b)(w.Lookup(ctx, RootIno, "d0500"))
		must[Attr](b)(w.Lookup(ctx, d.Ino, "f0050.txt"))
		total += time.Since(start)
		b.StopTimer()
		_ = w.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-first-lookup")
}

// BenchmarkSmallFiles: the engine's own cost per small-file operation of
// scripts/mount-perf.sh's workload (create+write+close, stat, unlink of
// 4 KiB files in directories of 100), without FUSE. Reports µs per
// operation of each phase; b.N rounds of 2,000 files.
func BenchmarkSmallFiles(b *testing.B) {
	url := benchStoreURL(b)
	initVolume(b, url)
	v := openVolume(b, url, "", func(o *Options) { o.CheckpointInterval = time.Hour })
	ctx := context.Background()
	data := make([]byte, 4096)
	const dirs, files = 20, 100
	var create, stat, unlink time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var dinos [dirs]uint64
		var inos [dirs][files]uint64
		start := time.Now()
		for d := range dirs {
			dinos[d] = must[Attr](b)(v.Mkdir(ctx, RootIno, fmt.Sprintf("r%d-d%d", i, d), 0o755, Cred{})).Ino
			for f := range files {
				inos[d][f] = writeFile(b, v, dinos[d], fmt.Sprintf("f%d", f), data).Ino
			}
		}
		create += time.Since(start)
		start = time.Now()
		for d := range dirs {
			for f := range files {
				must[Attr](b)(v.GetAttr(ctx, inos[d][f]))
			}
		}
		stat += time.Since(start)
		start = time.Now()
		for d := range dirs {
			for f := range files {
				if err := v.Unlink(ctx, dinos[d], fmt.Sprintf("f%d", f)); err != nil {
					b.Fatal(err)
				}
				must[Attr](b)(v.GetAttr(ctx, dinos[d])) // as the kernel does after each unlink
			}
		}
		unlink += time.Since(start)
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / float64(b.N*dirs*files) }
	b.ReportMetric(per(create), "µs/create")
	b.ReportMetric(per(stat), "µs/stat")
	b.ReportMetric(per(unlink), "µs/unlink")
}

// BenchmarkOpenReadRelease: the engine's own cost per file of grep -r over
// a synced tree of small (inline) files, without FUSE: open, one read of
// the whole file into a 128 KiB buffer, release, over 2,000 files of
// 3 KiB in directories of 100. Reports µs per operation of each kind; b.N
// rounds, and the process's CPU time per file. The per-file server time
// of `agentfs bench`'s grep-r phase is these three.
func BenchmarkOpenReadRelease(b *testing.B) {
	url := benchStoreURL(b)
	initVolume(b, url)
	v := openVolume(b, url, "", func(o *Options) { o.CheckpointInterval = time.Hour })
	ctx := context.Background()
	const dirs, files, size = 20, 100, 3 << 10
	populate(b, v, dirs, files, size)
	var inos []uint64
	for d := range dirs {
		da := must[Attr](b)(v.Lookup(ctx, RootIno, fmt.Sprintf("d%04d", d)))
		for f := range files {
			inos = append(inos, must[Attr](b)(v.Lookup(ctx, da.Ino, fmt.Sprintf("f%04d.txt", f))).Ino)
		}
	}
	buf := make([]byte, 128<<10)
	var open, read, release time.Duration
	b.ResetTimer()
	c0 := testenv.CPUTime()
	for i := 0; i < b.N; i++ {
		for _, ino := range inos {
			start := time.Now()
			must[Attr](b)(v.Open(ctx, ino, false))
			t1 := time.Now()
			if n := must[int](b)(v.Read(ctx, ino, buf, 0)); n != size {
				b.Fatalf("read %d bytes of inode %d, want %d", n, ino, size)
			}
			t2 := time.Now()
			if err := v.Release(ctx, ino); err != nil {
				b.Fatal(err)
			}
			open, read, release = open+t1.Sub(start), read+t2.Sub(t1), release+time.Since(t2)
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / float64(b.N*len(inos)) }
	b.ReportMetric(per(time.Duration(testenv.CPUTime()-c0)), "cpu-µs/file") // steadier than wall time on a loaded machine
	b.ReportMetric(per(open), "µs/open")
	b.ReportMetric(per(read), "µs/read")
	b.ReportMetric(per(release), "µs/release")
}
