package mcp

import (
	"context"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
)

// Target is what a tool call works on.
type Target struct {
	// Backend runs commands and file operations, rooted at the workspace.
	// On an agentfs mount it should carry the mount's seams
	// (internal/mountexec.Seams) so that a command's writes are synced
	// and its changes listed when it returns.
	Backend *exec.Backend
	// Control is the control client of the workspace's mount; nil when the
	// workspace is a plain directory, whose history tools then fail with
	// the code unavailable.
	Control *control.Client
}

// Workspace is the one workspace the tools of a server act on.
type Workspace interface {
	// Acquire readies the workspace (a daemon mounts it if needed) and pins
	// it until release is called. The tools call it once per tool call,
	// from the call's goroutine, and call release exactly once: when the
	// call returns, or for background_start when the job has ended. The
	// Backend it returns must be the same across calls for as long as a
	// job started through it may be asked about.
	Acquire(ctx context.Context) (t Target, release func(), err error)
}

// Fixed is a Workspace that is always ready: a directory (an agentfs mount
// or not) with its backend built once, as `agentfs mcp` serves it.
type Fixed Target

// Acquire returns the fixed target; release does nothing.
func (f Fixed) Acquire(context.Context) (Target, func(), error) {
	return Target(f), func() {}, nil
}
