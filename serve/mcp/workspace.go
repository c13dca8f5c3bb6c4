package mcp

import (
	"context"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/serve/workspace"
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
	// ReadOnly refuses the tools that change the workspace (forbidden):
	// what a read-only token gets.
	ReadOnly bool
	// Admit, when set, is asked before each command (job: a background
	// job) and returns the function to call when the command has ended;
	// its error refuses the command (a daemon's limits: busy). nil admits
	// every command.
	Admit func(job bool) (done func(), err error)
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

// Managed is a workspace of a daemon's manager: each tool call acquires it
// (mounting it if needed, see workspace.Manager.Acquire) and releases it
// when the call returns, or when its background job ends. Background jobs
// live in the mount's backend: they are listed while the workspace stays
// mounted, and a running job keeps it mounted.
type Managed struct {
	Manager *workspace.Manager
	Name    string
	// ReadOnly and Admit are copied into every Target.
	ReadOnly bool
	Admit    func(job bool) (done func(), err error)
}

// Acquire acquires the workspace from the manager.
func (w Managed) Acquire(ctx context.Context) (Target, func(), error) {
	h, err := w.Manager.Acquire(ctx, w.Name)
	if err != nil {
		return Target{}, nil, err
	}
	return Target{Backend: h.Backend, Control: h.Control, ReadOnly: w.ReadOnly, Admit: w.Admit}, h.Release, nil
}
