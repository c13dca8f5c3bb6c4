package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

func smallFilesWorkload() Workload {
	return Workload{
		Name: "smallfiles",
		Doc:  "create, stat, read and delete many files of a few KiB in a directory tree",
		Phases: []Phase{
			{Name: "create", Op: "open(O_CREAT|O_EXCL) + write + close of one file"},
			{Name: "stat", Op: "one lstat, in random order"},
			{Name: "read", Op: "open + read to EOF + close of one file, in random order, caches dropped first"},
			{Name: "delete", Op: "one unlink, in random order"},
		},
		run: runSmallFiles,
	}
}

func runSmallFiles(e *env) error {
	p := e.p
	gen := newDataGen(p.Seed + 2)
	names := make([]string, p.SmallFiles)
	for i := range names {
		d := filepath.Join(e.dir, fmt.Sprintf("d%04d", i/p.SmallFanout))
		if i%p.SmallFanout == 0 {
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
		}
		names[i] = filepath.Join(d, fmt.Sprintf("f%05d.dat", i))
	}
	if err := e.settle(); err != nil {
		return err
	}
	buf := make([]byte, p.SmallFileSize)
	err := e.measure("create", func(r *recorder) error {
		for i, name := range names {
			if err := e.ctx.Err(); err != nil {
				return err
			}
			gen.fill(buf, blockKey(2, i))
			start := time.Now()
			if err := createFile(name, buf); err != nil {
				return err
			}
			r.op(start, int64(len(buf)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	order := e.rng.Perm(len(names))
	err = e.measure("stat", func(r *recorder) error {
		for _, i := range order {
			start := time.Now()
			fi, err := os.Lstat(names[i])
			if err != nil {
				return err
			}
			r.op(start, 0)
			if fi.Size() != int64(p.SmallFileSize) {
				return fmt.Errorf("%s has size %d, wrote %d", names[i], fi.Size(), p.SmallFileSize)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := e.makeCold(names); err != nil {
		return err
	}
	order = e.rng.Perm(len(names))
	err = e.measure("read", func(r *recorder) error {
		for _, i := range order {
			if err := e.ctx.Err(); err != nil {
				return err
			}
			start := time.Now()
			n, err := readWhole(names[i], buf)
			if err != nil {
				return err
			}
			r.op(start, n)
			if n != int64(p.SmallFileSize) {
				return fmt.Errorf("read %d bytes of %s, wrote %d", n, names[i], p.SmallFileSize)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	order = e.rng.Perm(len(names))
	return e.measure("delete", func(r *recorder) error {
		for _, i := range order {
			start := time.Now()
			if err := os.Remove(names[i]); err != nil {
				return err
			}
			r.op(start, 0)
		}
		return nil
	})
}

// createFile creates name (which must not exist) holding data.
func createFile(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readWhole reads name to EOF using buf (at least one byte long) and
// returns the number of bytes read.
func readWhole(name string, buf []byte) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if len(buf) == 0 {
		buf = make([]byte, 4096)
	}
	var total int64
	for {
		n, err := f.Read(buf)
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func metadataWorkload() Workload {
	return Workload{
		Name: "metadata",
		Doc:  "mkdir, rename of files and of non-empty directories, listing of a large directory",
		Phases: []Phase{
			{Name: "mkdir", Op: "one mkdir"},
			{Name: "rename-file", Op: "one rename of a file within its directory"},
			{Name: "rename-dir", Op: "one rename of a non-empty directory to another parent"},
			{Name: "readdir", Op: "one listing of the large directory with an lstat of every entry (ls -l)"},
		},
		run: runMetadata,
	}
}

func runMetadata(e *env) error {
	p := e.p
	m, m2, f, big := filepath.Join(e.dir, "m"), filepath.Join(e.dir, "m2"), filepath.Join(e.dir, "f"), filepath.Join(e.dir, "big")
	for _, d := range []string{m, m2, f, big} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	for i := range p.MetaOps {
		if err := createFile(filepath.Join(f, fmt.Sprintf("x%05d", i)), nil); err != nil {
			return err
		}
	}
	for i := range p.ReaddirEntries {
		if err := createFile(filepath.Join(big, fmt.Sprintf("entry-%06d.txt", i)), nil); err != nil {
			return err
		}
	}
	if err := e.settle(); err != nil {
		return err
	}
	dirs := make([]string, p.MetaOps)
	err := e.measure("mkdir", func(r *recorder) error {
		for i := range dirs {
			dirs[i] = filepath.Join(m, fmt.Sprintf("d%05d", i))
			start := time.Now()
			if err := os.Mkdir(dirs[i], 0o755); err != nil {
				return err
			}
			r.op(start, 0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = e.measure("rename-file", func(r *recorder) error {
		for i := range p.MetaOps {
			from, to := filepath.Join(f, fmt.Sprintf("x%05d", i)), filepath.Join(f, fmt.Sprintf("y%05d", i))
			start := time.Now()
			if err := os.Rename(from, to); err != nil {
				return err
			}
			r.op(start, 0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Give every directory a file, so that each renamed one is non-empty.
	for _, d := range dirs {
		if err := createFile(filepath.Join(d, "keep"), []byte("x")); err != nil {
			return err
		}
	}
	err = e.measure("rename-dir", func(r *recorder) error {
		for i, d := range dirs {
			to := filepath.Join(m2, fmt.Sprintf("e%05d", i))
			start := time.Now()
			if err := os.Rename(d, to); err != nil {
				return err
			}
			r.op(start, 0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return e.measure("readdir", func(r *recorder) error {
		for range p.ReaddirRepeats {
			if err := e.ctx.Err(); err != nil {
				return err
			}
			start := time.Now()
			n, err := listLong(big)
			if err != nil {
				return err
			}
			r.op(start, 0)
			if n != p.ReaddirEntries {
				return fmt.Errorf("listed %d entries in %s, created %d", n, big, p.ReaddirEntries)
			}
		}
		return nil
	})
}

// listLong lists dir and lstats every entry, as `ls -l` does.
func listLong(dir string) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return 0, err
	}
	for _, de := range ents {
		if _, err := de.Info(); err != nil {
			return 0, err
		}
	}
	return len(ents), nil
}
