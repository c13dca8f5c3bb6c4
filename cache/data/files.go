package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Files is the directory of data files: one file per inode that has local
// bytes, named by its inode number under a subdirectory of its low byte.
// Invariant (kept by its callers): bytes of a data file outside the blocks
// its inode holds (dirty or present) are zeros, so that reading a hole of
// the file reads zeros.
type Files struct {
	dir string
}

// NewFiles returns the data files under dir, creating dir if needed.
func NewFiles(dir string) (*Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cache dir %s: %w", dir, err)
	}
	return &Files{dir: dir}, nil
}

// Dir returns the directory that holds the data files.
func (d *Files) Dir() string { return d.dir }

// Path returns the path of inode ino's data file (which may not exist).
func (d *Files) Path(ino uint64) string {
	return filepath.Join(d.dir, fmt.Sprintf("%02x", ino&0xff), strconv.FormatUint(ino, 10))
}

// Open opens inode ino's data file for reading and writing. With create,
// a missing file (and its subdirectory) is created; without, a missing
// file is (nil, nil).
func (d *Files) Open(ino uint64, create bool) (*os.File, error) {
	p := d.Path(ino)
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(p, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) && create {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, fmt.Errorf("cache data dir: %w", err)
		}
		f, err = os.OpenFile(p, flags, 0o600)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache data file: %w", err)
	}
	return f, nil
}

// Remove removes inode ino's data file; a missing file is no error.
func (d *Files) Remove(ino uint64) error {
	if err := os.Remove(d.Path(ino)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cache data file: %w", err)
	}
	return nil
}

// Reset removes every data file.
func (d *Files) Reset() error {
	if err := os.RemoveAll(d.dir); err != nil {
		return fmt.Errorf("reset cache: %w", err)
	}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return fmt.Errorf("reset cache: %w", err)
	}
	return nil
}

// PunchFile punches blocks (of bs bytes) out of inode ino's data file, if
// it exists, and with cut, cuts the file to size.
func (d *Files) PunchFile(ino uint64, blocks []uint64, bs uint64, cut bool, size uint64) error {
	f, err := d.Open(ino, false)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	if err := Punch(f, blocks, bs); err != nil {
		return err
	}
	if cut {
		if err := f.Truncate(int64(size)); err != nil {
			return fmt.Errorf("cache data file: %w", err)
		}
	}
	return nil
}

// Inodes returns the inodes that have a data file.
func (d *Files) Inodes() ([]uint64, error) {
	subs, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("cache data dir: %w", err)
	}
	var inos []uint64
	for _, sub := range subs {
		if !sub.IsDir() {
			continue
		}
		names, err := os.ReadDir(filepath.Join(d.dir, sub.Name()))
		if err != nil {
			return nil, fmt.Errorf("cache data dir: %w", err)
		}
		for _, e := range names {
			if ino, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && e.Type().IsRegular() && d.Path(ino) == filepath.Join(d.dir, sub.Name(), e.Name()) {
				inos = append(inos, ino)
			}
		}
	}
	return inos, nil
}

// KeepOnly punches out of inode ino's data file, if it exists, every byte
// outside blocks keep (sorted, of bs bytes each), keeping its size. On a
// filesystem that cannot punch holes it writes zeros there instead.
func (d *Files) KeepOnly(ino uint64, keep []uint64, bs uint64) error {
	f, err := d.Open(ino, false)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("cache data file: %w", err)
	}
	punch := func(off, end uint64) error {
		if end <= off {
			return nil
		}
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(end-off))
		if errors.Is(err, unix.EOPNOTSUPP) {
			err = writeZeros(f, off, end) // a filesystem that cannot punch
		}
		if err != nil {
			return fmt.Errorf("punch [%d, %d) out of %s: %w", off, end, f.Name(), err)
		}
		return nil
	}
	size, off := uint64(st.Size()), uint64(0)
	for _, b := range keep {
		if err := punch(off, min(b*bs, size)); err != nil {
			return err
		}
		off = (b + 1) * bs
	}
	return punch(off, size)
}

// writeZeros writes zeros over [off, end) of f.
func writeZeros(f *os.File, off, end uint64) error {
	zeros := make([]byte, min(end-off, 1<<20))
	for off < end {
		k, err := f.WriteAt(zeros[:min(uint64(len(zeros)), end-off)], int64(off))
		if err != nil {
			return err
		}
		off += uint64(k)
	}
	return nil
}

// Punch punches blocks (of bs bytes) out of data file f, keeping its size:
// they read as zeros afterwards and take no space.
func Punch(f *os.File, blocks []uint64, bs uint64) error {
	for _, b := range blocks {
		err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(b*bs), int64(bs))
		if err != nil {
			return fmt.Errorf("punch block %d out of %s: %w", b, f.Name(), err)
		}
	}
	return nil
}
