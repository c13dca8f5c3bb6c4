package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killOrphans kills every process (but this one) whose working directory
// lies on a workspace's mount point of this state directory: the commands
// a killed daemon left running (they run in sessions of their own, so
// they outlive it). Nothing else works there: the mount servers run in
// "/", and users reach workspaces through the API. It repeats until a scan
// finds none, so children forked meanwhile go too, and returns how many
// it killed.
func (m *Manager) killOrphans() int {
	root := filepath.Join(m.stateDir, "workspaces") + "/"
	self := os.Getpid()
	total := 0
	for pass := 0; pass < 100; pass++ {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return total
		}
		killed := 0
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self {
				continue
			}
			cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
			if err != nil || !onMountPoint(cwd, root) || !pidAlive(pid) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				m.log.Warn("killed a command a previous daemon left running in a workspace", "pid", pid, "cwd", cwd)
				killed++
			}
		}
		total += killed
		if killed == 0 {
			return total
		}
		time.Sleep(10 * time.Millisecond)
	}
	return total
}

// onMountPoint reports whether path lies on a workspace mount point under
// root (STATE_DIR/workspaces/): root/NAME/mnt or below it.
func onMountPoint(path, root string) bool {
	rest, ok := strings.CutPrefix(path, root)
	if !ok {
		return false
	}
	_, after, ok := strings.Cut(rest, "/")
	return ok && (after == "mnt" || strings.HasPrefix(after, "mnt/"))
}
