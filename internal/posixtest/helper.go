package posixtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv carries a JSON helperRequest to a re-executed test binary.
const helperEnv = "AGENTFS_POSIXTEST_HELPER"

// helperRequest is what a child process does: open Dir and make it the
// working directory (as the starting user), optionally drop to UID/GID, run Steps in order, print a
// helperResult as one JSON line, and, when Hold is set, keep its locks and
// descriptors until its standard input closes.
type helperRequest struct {
	Dir      string
	UID, GID int // dropped to when UID > 0
	Steps    []helperStep
	Hold     bool
}

// helperStep is one operation on Name, relative to the request's Dir.
type helperStep struct {
	Op   string // see doStep
	Name string
	Arg  string
	Lock unix.Flock_t
}

// helperResult holds, per step, the errno name ("" for success) and, for
// getlk, the lock reported.
type helperResult struct {
	Errs  []string
	Locks []unix.Flock_t
}

func init() {
	req := os.Getenv(helperEnv)
	if req == "" {
		return
	}
	os.Exit(helperMain(req))
}

// helperMain runs in the child. It must not use the testing package.
func helperMain(raw string) int {
	var req helperRequest
	if err := json.Unmarshal([]byte(raw), &req); err != nil {
		fmt.Fprintln(os.Stderr, "posixtest helper: bad request:", err)
		return 2
	}
	dfd, err := unix.Open(req.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "posixtest helper: open dir:", err)
		return 2
	}
	if err := unix.Fchdir(dfd); err != nil {
		fmt.Fprintln(os.Stderr, "posixtest helper: fchdir:", err)
		return 2
	}
	if req.UID > 0 {
		// syscall (not x/sys/unix) applies these to every thread.
		if err := syscall.Setgroups(nil); err != nil {
			fmt.Fprintln(os.Stderr, "posixtest helper: setgroups:", err)
			return 2
		}
		if err := syscall.Setgid(req.GID); err != nil {
			fmt.Fprintln(os.Stderr, "posixtest helper: setgid:", err)
			return 2
		}
		if err := syscall.Setuid(req.UID); err != nil {
			fmt.Fprintln(os.Stderr, "posixtest helper: setuid:", err)
			return 2
		}
	}
	files := map[string]int{} // descriptors kept open for locks
	var res helperResult
	for _, s := range req.Steps {
		lk, err := doStep(dfd, files, s)
		name := ""
		var errno unix.Errno
		if errors.As(err, &errno) {
			name = unix.ErrnoName(errno)
		} else if err != nil {
			name = err.Error()
		}
		res.Errs = append(res.Errs, name)
		res.Locks = append(res.Locks, lk)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return 2
	}
	fmt.Println(string(out))
	if req.Hold {
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	return 0
}

// doStep performs one helper step.
func doStep(dfd int, files map[string]int, s helperStep) (unix.Flock_t, error) {
	var none unix.Flock_t
	openAt := func(flags int) (int, error) {
		return unix.Openat(dfd, s.Name, flags|unix.O_CLOEXEC, 0o644)
	}
	closed := func(fd int, err error) error {
		if err != nil {
			return err
		}
		return unix.Close(fd)
	}
	switch s.Op {
	case "getlk", "setlk":
		fd, ok := files[s.Name]
		if !ok {
			var err error
			if fd, err = openAt(unix.O_RDWR); err != nil {
				return none, err
			}
			files[s.Name] = fd
		}
		lk := s.Lock
		cmd := unix.F_SETLK
		if s.Op == "getlk" {
			cmd = unix.F_GETLK
		}
		err := unix.FcntlFlock(uintptr(fd), cmd, &lk)
		return lk, err
	case "open-read":
		return none, closed(openAt(unix.O_RDONLY))
	case "open-write":
		return none, closed(openAt(unix.O_WRONLY))
	case "create":
		return none, closed(openAt(unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL))
	case "write":
		fd, err := openAt(unix.O_WRONLY)
		if err != nil {
			return none, err
		}
		_, werr := unix.Pwrite(fd, []byte(s.Arg), 0)
		return none, errors.Join(werr, unix.Close(fd))
	case "readdir":
		fd, err := openAt(unix.O_RDONLY | unix.O_DIRECTORY)
		if err != nil {
			return none, err
		}
		_, rerr := unix.Getdents(fd, make([]byte, 4096))
		return none, errors.Join(rerr, unix.Close(fd))
	case "unlink":
		return none, unix.Unlinkat(dfd, s.Name, 0)
	case "rmdir":
		return none, unix.Unlinkat(dfd, s.Name, unix.AT_REMOVEDIR)
	case "mkdir":
		return none, unix.Mkdirat(dfd, s.Name, 0o755)
	case "rename":
		return none, unix.Renameat(dfd, s.Name, dfd, s.Arg)
	case "chmod":
		mode, err := strconv.ParseUint(s.Arg, 8, 32)
		if err != nil {
			return none, err
		}
		return none, unix.Fchmodat(dfd, s.Name, uint32(mode), 0)
	case "chown":
		uid, err := strconv.Atoi(s.Arg)
		if err != nil {
			return none, err
		}
		return none, unix.Fchownat(dfd, s.Name, uid, -1, 0)
	case "utime-now":
		return none, unix.UtimesNanoAt(dfd, s.Name, nil, 0)
	case "utime-set":
		return none, unix.UtimesNanoAt(dfd, s.Name, []unix.Timespec{pastTime, pastTime}, 0)
	case "truncate":
		fd, err := openAt(unix.O_WRONLY | unix.O_TRUNC)
		return none, closed(fd, err)
	case "fallocate":
		// Arg names the mode, a key of fallocModes.
		mode, known := fallocModes[s.Arg]
		if !known {
			return none, fmt.Errorf("unknown fallocate mode %q", s.Arg)
		}
		fd, err := openAt(unix.O_WRONLY)
		if err != nil {
			return none, err
		}
		ferr := unix.Fallocate(fd, mode, 0, 8192)
		return none, errors.Join(ferr, unix.Close(fd))
	case "setxattr":
		// Relative to the working directory, which helperMain set to Dir.
		return none, unix.Setxattr(s.Name, "user.helper", []byte(s.Arg), 0)
	case "getxattr":
		_, err := unix.Getxattr(s.Name, "user.helper", make([]byte, 64))
		return none, err
	}
	return none, fmt.Errorf("unknown helper op %q", s.Op)
}

// fallocModes are the fallocate(2) modes a helper step can name: each
// changes a file's data.
var fallocModes = map[string]uint32{
	"extend":     0,
	"punch-hole": unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE,
	"zero-range": unix.FALLOC_FL_ZERO_RANGE,
	"keep-size":  unix.FALLOC_FL_KEEP_SIZE,
}

// helperProc is a running child started by startHelper.
type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

// startHelper re-executes the test binary to run req in a separate process
// and returns its result once printed. With req.Hold the child keeps its
// locks until release is called; release also waits for it to exit. The
// child is killed at cleanup if still running.
func startHelper(t *testing.T, req helperRequest) (helperResult, func()) {
	t.Helper()
	exe, err := os.Executable()
	ok(t, "find the test binary", err)
	raw, err := json.Marshal(req)
	ok(t, "encode helper request", err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	ok(t, "helper stdout", err)
	stdin, err := cmd.StdinPipe()
	ok(t, "helper stdin", err)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start helper %s: %v", exe, err)
	}
	p := &helperProc{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	line, readErr := bufio.NewReader(stdout).ReadBytes('\n')
	go func() {
		_, _ = io.Copy(io.Discard, stdout)
		p.done <- cmd.Wait()
		cancel()
	}()
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		stdin.Close()
		if err := <-p.done; err != nil {
			t.Errorf("helper process: %v", err)
		}
	}
	t.Cleanup(func() {
		if !released {
			_ = cmd.Process.Kill()
			released = true
			if err := <-p.done; err != nil {
				t.Logf("helper process killed at cleanup: %v", err)
			}
		}
	})
	if readErr != nil {
		release()
		t.Fatalf("helper printed no result: %v", readErr)
	}
	var res helperResult
	if err := json.Unmarshal(line, &res); err != nil {
		release()
		t.Fatalf("helper result %q: %v", line, err)
	}
	if len(res.Errs) != len(req.Steps) {
		release()
		t.Fatalf("helper ran %d of %d steps", len(res.Errs), len(req.Steps))
	}
	return res, release
}

// runHelper runs req in a child process to completion and returns its
// result.
func runHelper(t *testing.T, req helperRequest) helperResult {
	t.Helper()
	req.Hold = false
	res, release := startHelper(t, req)
	release()
	return res
}
