package cache

import (
	"encoding/binary"
	"hash/fnv"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Generation returns a number that tells this cache directory's inode
// numbers from those of another, for the file handles of a mount (FUSE's
// generation): the engine never reuses an inode number within one cache
// directory, but a new cache directory numbers inodes anew, so a handle
// made under one must not name a file under another. It is derived from
// the identity of the database directory on the local disk (its inode
// number and birth time), which is fixed for the life of the cache
// directory and differs, with high probability, for a new one.
func (v *Volume) Generation() uint32 {
	var st unix.Statx_t
	h := fnv.New32a()
	if err := unix.Statx(unix.AT_FDCWD, filepath.Join(v.opts.CacheDir, "meta"), 0, unix.STATX_INO|unix.STATX_BTIME, &st); err == nil {
		var b [20]byte
		binary.LittleEndian.PutUint64(b[0:], st.Ino)
		binary.LittleEndian.PutUint64(b[8:], uint64(st.Btime.Sec))
		binary.LittleEndian.PutUint32(b[16:], st.Btime.Nsec)
		h.Write(b[:])
	}
	return h.Sum32() | 1 // never 0: the kernel's "no generation"
}
