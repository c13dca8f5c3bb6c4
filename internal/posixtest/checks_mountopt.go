package posixtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// checkDeviceOpen (root): a device node opened on the filesystem reaches
// its device when the mount allows it (dev) and fails with EACCES when it
// does not (nodev, as statfs reports with ST_NODEV).
func checkDeviceOpen(t *testing.T, dir string) {
	needRoot(t, "mknod of device nodes needs CAP_MKNOD")
	nodev := statfsFlags(t, dir)&unix.ST_NODEV != 0
	t.Logf("mount nodev: %v", nodev)
	p := join(dir, "null")
	ok(t, "mknod", unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if nodev {
		wantErrno(t, "open of a device node on a nodev mount", err, unix.EACCES)
		if err == nil {
			_ = unix.Close(fd)
		}
		return
	}
	ok(t, "open of /dev/null's device node", err)
	defer closeQuietly(&fd)
	if n, err := unix.Write(fd, []byte("discarded")); err != nil || n != 9 {
		t.Errorf("write to the null device: %d, %v", n, err)
	}
	if st := lstat(t, p); st.Size != 0 {
		t.Errorf("writing to a device node changed its size to %d", st.Size)
	}
}

// checkSetuidExec (root): a set-user-ID program run from the filesystem
// runs as its owner when the mount allows it (suid) and as the caller when
// it does not (nosuid, as statfs reports with ST_NOSUID). The program is a
// copy of id(1) owned by uid 65534.
func checkSetuidExec(t *testing.T, dir string) {
	needRoot(t, "chown to another uid")
	nosuid := statfsFlags(t, dir)&unix.ST_NOSUID != 0
	t.Logf("mount nosuid: %v", nosuid)
	src, err := exec.LookPath("id")
	ok(t, "find id(1)", err)
	b, err := os.ReadFile(src)
	ok(t, "read "+src, err)
	p := join(dir, "id")
	writeFile(t, p, b, 0o755)
	ok(t, "chown", unix.Chown(p, nobody, nobody))
	ok(t, "chmod", unix.Chmod(p, 0o4755))
	out, err := exec.Command(p, "-u").Output()
	ok(t, "run the set-user-ID copy of id", err)
	want := "65534"
	if nosuid {
		want = "0"
	}
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("a set-user-ID program of uid %d run by root (nosuid %v) ran as euid %s, want %s", nobody, nosuid, got, want)
	}
}

// statfsFlags returns the mount flags (ST_*) statfs reports for dir.
func statfsFlags(t testing.TB, dir string) int64 {
	t.Helper()
	var sfs unix.Statfs_t
	ok(t, "statfs "+dir, unix.Statfs(dir, &sfs))
	return sfs.Flags
}
