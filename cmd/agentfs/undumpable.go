package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// undumpable makes this process not dumpable (prctl PR_SET_DUMPABLE 0):
// its /proc/PID/environ and memory can then be read, and the process
// traced, only by a process with CAP_SYS_PTRACE, no longer by every
// process of the same user. The daemon of `agentfs serve`, `agentfs mcp`
// and every mount server call it at start: the daemon (or mcp) may have
// been given the volume's key, the admin token or store credentials in its
// environment, and removing a variable with os.Unsetenv changes Go's copy
// only, not the environment the kernel shows in /proc/PID/environ; a mount
// server holds the volume's key in memory (a server started by
// internal/mountproc gets it through a pipe, never its environment: what
// the kernel shows there before this call holds no key,
// TestKeyNotInMountServerEnviron) and store credentials in its
// environment. The local backend's commands run as the daemon's user: as
// an unprivileged user they can no longer read either
// (TestUndumpableHidesEnviron); run as root they still can (measured: even
// without CAP_SYS_PTRACE). It also disables core dumps of the process.
// Children are not affected: execve makes a process dumpable again.
func undumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
