package bench

import (
	"path/filepath"

	"github.com/agentfs/agentfs/internal/mountinfo"
)

// mountOf returns the mount holding dir (symlinks resolved), read from
// /proc/self/mountinfo.
func mountOf(dir string) (mountinfo.Mount, error) {
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return mountinfo.Mount{}, err
	}
	p, err = filepath.Abs(p)
	if err != nil {
		return mountinfo.Mount{}, err
	}
	return mountinfo.Of(p)
}

// isFUSEMountPoint reports whether the absolute, clean path dir is itself a
// mount point of a FUSE filesystem in /proc/self/mountinfo.
func isFUSEMountPoint(dir string) (bool, error) {
	ms, err := mountinfo.Read()
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.MountPoint == dir && m.IsFUSE() {
			return true, nil
		}
	}
	return false, nil
}
