package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

func bigFileWorkload() Workload {
	return Workload{
		Name: "bigfile",
		Doc:  "each of --threads threads writes its own large file sequentially and fsyncs it, then reads it back after dropping caches",
		Phases: []Phase{
			{Name: "write", Op: "one --block-size write; each thread's closing fsync is inside the phase time"},
			{Name: "read", Op: "one --block-size read, caches dropped first"},
		},
		run: runBigFile,
	}
}

func runBigFile(e *env) error {
	p := e.p
	gen := newDataGen(p.Seed)
	files := make([]string, p.Threads)
	for i := range files {
		files[i] = filepath.Join(e.dir, fmt.Sprintf("big-%d", i))
	}
	err := e.measure("write", func(r *recorder) error {
		g, _ := errgroup.WithContext(e.ctx)
		for t, name := range files {
			g.Go(func() error { return writeBig(e, r, gen, name, t) })
		}
		return g.Wait()
	})
	if err != nil {
		return err
	}
	if err := e.makeCold(files); err != nil {
		return err
	}
	return e.measure("read", func(r *recorder) error {
		g, _ := errgroup.WithContext(e.ctx)
		for _, name := range files {
			g.Go(func() error { return readBig(e, r, name) })
		}
		return g.Wait()
	})
}

func writeBig(e *env, r *recorder, gen *dataGen, name string, stream int) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, e.p.BlockSize)
	for i, left := 0, e.p.BigFileSize; left > 0; i++ {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		b := buf[:min(int64(len(buf)), left)]
		gen.fill(b, blockKey(stream, i))
		start := time.Now()
		if _, err := f.Write(b); err != nil {
			return err
		}
		r.op(start, int64(len(b)))
		left -= int64(len(b))
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func readBig(e *env, r *recorder, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, e.p.BlockSize)
	var total int64
	for {
		if err := e.ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		n, err := f.Read(buf)
		if n > 0 {
			r.op(start, int64(n))
			total += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if total != e.p.BigFileSize {
		return fmt.Errorf("read %d bytes of %s, wrote %d", total, name, e.p.BigFileSize)
	}
	return nil
}

func randomWorkload() Workload {
	return Workload{
		Name: "random",
		Doc:  "4 KiB preads (through the page cache, then O_DIRECT), then pwrites, at random aligned offsets of one large file, from --threads threads",
		Phases: []Phase{
			{Name: "randread", Op: "one 4 KiB pread at a random offset, caches dropped first"},
			{Name: "randread-direct", Op: "one 4 KiB pread at a random offset of the file opened with O_DIRECT (as fio --direct=1)"},
			{Name: "randwrite", Op: "one 4 KiB pwrite at a random offset; the closing fsync is inside the phase time"},
		},
		run: runRandom,
	}
}

const randBlock = 4096

func runRandom(e *env) error {
	p := e.p
	gen := newDataGen(p.Seed + 1)
	name := filepath.Join(e.dir, "random")
	if err := writeFileSeq(name, p.RandFileSize, gen); err != nil {
		return err
	}
	if err := e.makeCold([]string{name}); err != nil {
		return err
	}
	// The reads use read-only descriptors, as fio's randread does (a
	// mount may serve a file read-only opened differently, e.g. FUSE
	// passthrough); the writes open the file for writing afterwards.
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	blocks := p.RandFileSize / randBlock
	// Each thread gets its own seeded source and its share of the ops.
	share := func(t int) int { return p.RandOps/p.Threads + btoi(t < p.RandOps%p.Threads) }
	run := func(name string, fn func(r *recorder, rng *rand.Rand, buf []byte, t int) error) error {
		return e.measure(name, func(r *recorder) error {
			g, _ := errgroup.WithContext(e.ctx)
			for t := range p.Threads {
				rng := rand.New(rand.NewPCG(p.Seed, uint64(t)+uint64(len(name))<<32))
				g.Go(func() error { return fn(r, rng, alignedBlock(), t) })
			}
			return g.Wait()
		})
	}
	randRead := func(f *os.File) func(r *recorder, rng *rand.Rand, buf []byte, t int) error {
		return func(r *recorder, rng *rand.Rand, buf []byte, t int) error {
			for range share(t) {
				if err := e.ctx.Err(); err != nil {
					return err
				}
				off := rng.Int64N(blocks) * randBlock
				start := time.Now()
				n, err := f.ReadAt(buf, off)
				if err != nil {
					return err
				}
				r.op(start, int64(n))
			}
			return nil
		}
	}
	if err := run("randread", randRead(f)); err != nil {
		return err
	}
	direct, err := openDirect(name)
	if err != nil {
		return err
	}
	defer direct.Close()
	if err := run("randread-direct", randRead(direct)); err != nil {
		return err
	}
	f.Close()
	direct.Close()
	if f, err = os.OpenFile(name, os.O_RDWR, 0); err != nil {
		return err
	}
	return run("randwrite", func(r *recorder, rng *rand.Rand, buf []byte, t int) error {
		for i := range share(t) {
			if err := e.ctx.Err(); err != nil {
				return err
			}
			off := rng.Int64N(blocks) * randBlock
			gen.fill(buf, blockKey(1000+t, i))
			start := time.Now()
			n, err := f.WriteAt(buf, off)
			if err != nil {
				return err
			}
			r.op(start, int64(n))
		}
		// Each thread syncs the file, so the phase ends only when every
		// thread's writes are durable.
		return f.Sync()
	})
}

// alignedBlock returns a randBlock-long buffer aligned to randBlock, as
// O_DIRECT I/O requires.
func alignedBlock() []byte {
	buf := make([]byte, 2*randBlock)
	off := int(uintptr(unsafe.Pointer(&buf[0])) & (randBlock - 1))
	if off != 0 {
		off = randBlock - off
	}
	return buf[off : off+randBlock]
}

// openDirect opens name for reading with O_DIRECT.
func openDirect(name string) (*os.File, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s with O_DIRECT: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeFileSeq creates name with size bytes of generated content and
// fsyncs it (set-up, not timed).
func writeFileSeq(name string, size int64, gen *dataGen) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i, left := 0, size; left > 0; i++ {
		b := buf[:min(int64(len(buf)), left)]
		gen.fill(b, blockKey(999, i))
		if _, err := f.Write(b); err != nil {
			return err
		}
		left -= int64(len(b))
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// settle makes the writes before a timed phase (its set-up, or what the
// phase before wrote) durable, so that they do not land in it: syncfs of the filesystem holding the work
// directory and, in an agentfs mount, a sync through the mount (Mount.Sync).
// The kernel passes syncfs to no FUSE server but virtiofs, so without the
// mount's own sync its next checkpoint commits the set-up in the
// background, during whichever phase runs then (grep -r after tar -x and
// ls -lR, which got 3-20x faster, measured the checkpoint of the 10,000
// files tar wrote, and looked slower than on the mount that listed slower).
func (e *env) settle() error {
	f, err := os.Open(e.dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", e.dir, err)
	}
	if e.mount != nil {
		if err := e.mount.Sync(e.ctx); err != nil {
			return fmt.Errorf("sync the mount of %s: %w", e.dir, err)
		}
	}
	return nil
}
