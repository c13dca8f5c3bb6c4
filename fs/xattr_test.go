package fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/posixtest"
)

// TestUnsupportedXattrs checks the attributes a mount answers "not
// supported" for (the SELinux label, and POSIX ACLs unless the kernel
// enforces them), that user.* and trusted.* attributes keep working next to
// them, and what it buys: `ls -l` asks for a label and an ACL once per
// process instead of at every file.
func TestUnsupportedXattrs(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	c := m.Client(t)
	f := filepath.Join(m.Dir, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// On a directory, which may have a default ACL, with a valid value of
	// each: the kernel checks both before passing them on.
	acl := filepath.Join(m.Dir, "acl")
	if err := os.Mkdir(acl, 0o755); err != nil {
		t.Fatal(err)
	}
	values := map[string][]byte{
		"security.selinux":         []byte("system_u:object_r:user_home_t:s0"),
		"system.posix_acl_access":  minimalACL,
		"system.posix_acl_default": minimalACL,
	}
	for name, value := range values {
		if _, err := unix.Getxattr(acl, name, make([]byte, 64)); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("getxattr %s: %v, want EOPNOTSUPP", name, err)
		}
		if err := unix.Setxattr(acl, name, value, 0); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("setxattr %s: %v, want EOPNOTSUPP", name, err)
		}
		if err := unix.Removexattr(acl, name); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("removexattr %s: %v, want EOPNOTSUPP", name, err)
		}
	}
	// fstest.Start needs root (testenv.NeedFUSE), so trusted.* can be set.
	for _, name := range []string{"user.a", "trusted.a"} {
		if err := unix.Setxattr(f, name, []byte("v"), 0); err != nil {
			t.Errorf("setxattr %s: %v", name, err)
		}
		if n, err := unix.Getxattr(f, name, make([]byte, 8)); err != nil || n != 1 {
			t.Errorf("getxattr %s: %d, %v", name, n, err)
		}
	}

	d := filepath.Join(m.Dir, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = 50
	for i := range files {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ls := func() {
		t.Helper()
		if out, err := exec.Command("ls", "-l", d).CombinedOutput(); err != nil {
			t.Fatalf("ls -l: %v\n%s", err, out)
		}
	}
	ls()
	// coreutils' ls remembers a filesystem (st_dev) that answered "not
	// supported" for ACLs or the label and asks no more; newer ones list
	// the names instead of asking for each (LISTXATTR, not counted here).
	if n := requests(t, c, "getxattr", ls); n > 2 {
		t.Errorf("ls -l of %d files sent %d GETXATTR requests, want at most 2 (one per attribute)", files, n)
	}
}

// minimalACL is the attribute value of the ACL rw-r--r-- (the base
// entries only): version 2, then tag, permissions and id of each entry.
var minimalACL = []byte{
	2, 0, 0, 0,
	0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, // ACL_USER_OBJ rw-
	0x04, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, // ACL_GROUP_OBJ r--
	0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, // ACL_OTHER r--
}

// TestPosixACLTuning checks that a mount whose kernel enforces POSIX ACLs
// (--tune posixacl=1) serves their attributes.
func TestPosixACLTuning(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Args: []string{"--tune", "posixacl=1"}})
	f := filepath.Join(m.Dir, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Getxattr(f, "system.posix_acl_access", make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
		t.Errorf("getxattr system.posix_acl_access: %v, want ENODATA", err)
	}
	if _, err := unix.Getxattr(f, "security.selinux", make([]byte, 64)); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("getxattr security.selinux: %v, want EOPNOTSUPP", err)
	}
}

// TestDirectWriteTuning checks the experiment --tune directwrite=1: a new
// file written through a write-only descriptor costs no GETXATTR of
// security.capability (the kernel's privilege check is skipped for
// FOPEN_DIRECT_IO writes) and reads back what was written; the POSIX
// checks of the write path still pass (the server drops set-user-ID bits
// itself).
func TestDirectWriteTuning(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Args: []string{"--tune", "directwrite=1"}})
	c := m.Client(t)
	p := filepath.Join(m.Dir, "f")
	want := append(bytes.Repeat([]byte("x"), 100), bytes.Repeat([]byte("y"), 5000)...)
	if n := requests(t, c, "getxattr", func() {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{want[:100], want[100:]} {
			if _, err := f.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("a create and two writes sent %d GETXATTR requests, want 0", n)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Errorf("read back %d bytes (%v), want %d", len(got), err, len(want))
	}
	for _, name := range []string{"CreateReadWrite", "Append", "OpenTrunc", "ConcurrentWriters", "KillPrivData", "KillPrivCaps", "WorkloadTar", "WorkloadCp"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(m.Dir, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			posixtest.Checks[name](t, dir)
		})
	}
}
