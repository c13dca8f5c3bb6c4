package bench

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ColdMode says how bench makes reads cold.
type ColdMode string

// The cold modes.
const (
	// ColdAuto drops the whole page cache, dentries and inodes (ColdDrop)
	// when the process may, and falls back to ColdFadvise otherwise; the
	// report says which one ran and why.
	ColdAuto ColdMode = "auto"
	// ColdDrop runs sync and writes 3 to /proc/sys/vm/drop_caches
	// (root only). It drops the caches of every filesystem on the machine,
	// including the files behind a FUSE server, but not caches a FUSE server
	// keeps in its own memory or on its own disk.
	ColdDrop ColdMode = "drop"
	// ColdFadvise fdatasyncs each file read next and drops its cached pages
	// with posix_fadvise(POSIX_FADV_DONTNEED). Dentries and inodes stay
	// cached, and on a FUSE mount so do the pages of the files behind it.
	ColdFadvise ColdMode = "fadvise"
	// ColdNone drops nothing: reads may be served from memory.
	ColdNone ColdMode = "none"
)

// Validate reports whether m is one of the modes.
func (m ColdMode) Validate() error {
	switch m {
	case ColdAuto, ColdDrop, ColdFadvise, ColdNone:
		return nil
	}
	return fmt.Errorf("unknown cold mode %q: use auto, drop, fadvise or none", string(m))
}

const dropCachesPath = "/proc/sys/vm/drop_caches"

const (
	noteDrop    = "page cache, dentries and inodes dropped machine-wide (sync; drop_caches=3); caches inside FUSE servers stay warm"
	noteFadvise = "file pages dropped (fdatasync; posix_fadvise DONTNEED); dentries, inodes and pages behind FUSE servers stay warm"
	noteNone    = "warm: no cache dropped"
	noteNoFiles = "warm: fadvise drops file pages only, and this phase reads directories (dentries and inodes need drop_caches: --cold drop, root)"
)

// makeCold drops caches before the next measured phase, which will read
// files (nil: only directories and inodes), and records what was dropped.
// What was written before is settled first, so that the reads do not carry
// an agentfs mount's checkpoint of it (a bigfile read after its write).
func (e *env) makeCold(files []string) error {
	if err := e.settle(); err != nil {
		return err
	}
	note, err := dropCaches(e.p.Cold, files)
	if err != nil {
		return err
	}
	e.cold = note
	return nil
}

// dropCaches applies mode to files and returns a note that says which
// caches are now cold.
func dropCaches(mode ColdMode, files []string) (string, error) {
	switch mode {
	case ColdNone:
		return noteNone, nil
	case ColdFadvise:
		if len(files) == 0 {
			return noteNoFiles, nil
		}
		return noteFadvise, fadviseDontNeed(files)
	case ColdDrop:
		if err := dropAll(); err != nil {
			return "", err
		}
		return noteDrop, nil
	case ColdAuto:
		err := dropAll()
		if err == nil {
			return noteDrop, nil
		}
		note, ferr := dropCaches(ColdFadvise, files)
		if ferr != nil {
			return "", errors.Join(err, ferr)
		}
		return note + fmt.Sprintf(" (drop_caches unavailable: %v)", err), nil
	}
	return "", mode.Validate()
}

func dropAll() error {
	unix.Sync()
	f, err := os.OpenFile(dropCachesPath, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("drop caches: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString("3\n"); err != nil {
		return fmt.Errorf("drop caches: write %s: %w", dropCachesPath, err)
	}
	return nil
}

func fadviseDontNeed(files []string) error {
	for _, name := range files {
		if err := fadviseFile(name); err != nil {
			return err
		}
	}
	return nil
}

func fadviseFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("drop cached pages: %w", err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := unix.Fdatasync(fd); err != nil {
		return fmt.Errorf("drop cached pages: fdatasync %s: %w", name, err)
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop cached pages: fadvise %s: %w", name, err)
	}
	return nil
}
