package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fadviseDontNeed drops f's pages from the page cache.
func fadviseDontNeed(f *os.File) error {
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
