package exec

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Killing a command's whole process tree on the host.
//
// Every command starts in a session of its own (setsid), and carries a
// random tag in its environment (AGENTFS_EXEC_ID), which its descendants
// inherit. sweepHost kills with SIGKILL every process that is in one of the
// command's sessions or carries the tag, and adds the session of every
// tagged process to the set (so a child that called setsid is killed with
// its own children, even those that cleared their environment), repeating
// until a scan of /proc finds nothing left. Killing is idempotent, so
// processes forked during a scan are caught by the next one.
//
// What escapes: a process that both leaves the command's sessions (setsid)
// and drops the tag from its environment (env -i), and the descendants it
// starts afterwards. A cgroup per command would close that gap but needs a
// delegated cgroup v2 subtree; PR_SET_CHILD_SUBREAPER would make orphans
// this process's children, which a library cannot reap without stealing
// os/exec's wait statuses. The docker backend removes its container on
// Close, which ends everything.

// sweepHost kills the process trees described above. sessions are the
// session ids known from the start (the command's main pid); tag is the
// command's AGENTFS_EXEC_ID value.
func sweepHost(ctx context.Context, sessions []int, tag string) error {
	self := os.Getpid()
	ownSid, _ := unix.Getsid(0)
	set := map[int]bool{}
	for _, s := range sessions {
		if s > 1 && s != ownSid {
			set[s] = true
		}
	}
	needle := []byte(envTag + "=" + tag)
	for pass := 0; ; pass++ {
		killed, err := sweepHostOnce(self, ownSid, set, needle)
		if err != nil {
			return err
		}
		if killed == 0 {
			return nil
		}
		if pass >= 1000 {
			return fmt.Errorf("processes of the command keep appearing after %d passes", pass)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if pass > 10 {
			time.Sleep(time.Millisecond)
		}
	}
}

// sweepHostOnce scans /proc once, killing matches; it returns how many
// signals it sent.
func sweepHostOnce(self, ownSid int, sessions map[int]bool, needle []byte) (int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	killed := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		state, sid, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		hit := sessions[sid]
		if !hit && procHasTag(pid, needle) {
			hit = true
			if sid > 1 && sid != ownSid {
				sessions[sid] = true
			}
		}
		if hit && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed, nil
}

// procStat reads the state and session id of pid from the stat file of its
// main thread (/proc/PID/task/PID/stat: the same fields as /proc/PID/stat,
// without the kernel summing the times of every thread).
func procStat(pid int) (state byte, sid int, ok bool) {
	s := strconv.Itoa(pid)
	b, err := os.ReadFile("/proc/" + s + "/task/" + s + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp session ...; comm may hold spaces and ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 || len(f[0]) != 1 {
		return 0, 0, false
	}
	sid, err = strconv.Atoi(f[3])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], sid, true
}

// procHasTag reports whether pid's environment holds needle (K=V) as a
// whole entry.
func procHasTag(pid int, needle []byte) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	if !bytes.Contains(env, needle) {
		return false
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, needle) {
			return true
		}
	}
	return false
}

// processStartTime returns the start time of pid (clock ticks since boot,
// field 22 of /proc/PID/stat), which with the pid identifies a process
// across pid reuse.
func processStartTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return f[19], nil
}
