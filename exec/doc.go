// Package exec runs commands in a workspace directory and gives agents
// confined access to its files: the execution backends of agentfs.
//
// A *Backend is made by NewLocal (processes on this host) or NewDocker (one
// container per backend, the workspace bind-mounted at /workspace, each
// command a docker exec). Both offer the surface agent frameworks use:
// Exec and Start (background jobs) with a shell string or argv, env, a cwd
// confined to the workspace, a timeout, stdin and an output cap; file
// operations (ReadFile, Read with line numbers, WriteFile, Edit, List, Glob
// with **, Grep, Remove, Rename, Copy, Mkdir, Stat, Exists); Scope for a
// backend confined to a subdirectory; and an optional command Policy.
//
// # Process trees
//
// A command owns its whole process tree. When its main process exits, when
// its timeout fires, when its ctx ends and when the backend closes, every
// process it started is killed with SIGKILL, background children and
// grandchildren included, before Exec returns; use Start for anything that
// must keep running. Each command runs in a session of its own and carries a
// random AGENTFS_EXEC_ID in its environment; the kill takes every process of
// those sessions and every process with that tag (so children that called
// setsid go too), repeating until none is left. On the host this is done in
// Go over /proc; in a container by a shell script in a second exec (Docker
// has no API to kill an exec). A process that both leaves the session and
// clears its environment escapes; the container's removal on Close ends it.
// See proctree.go and dockerscripts.go.
//
// # Seams for an agentfs mount
//
// Two interfaces connect a backend to the filesystem beneath it: Syncer, the
// sync barrier called after every command (so that what it wrote is in blob
// storage when Exec returns), and ChangeTracker, which lists what a command
// created, modified and deleted (WalkTracker walks a plain directory; a
// mount supplies a journal-based one). Both are Options.
//
// # What this package must never do
//
// It never imports the layers below it that serve the mount (cache,
// overlay, fs): a backend runs in the CLI or library process, never in the
// process that serves the mount, since forking a child whose cwd is on a
// FUSE mount from that mount's own server can deadlock. It is no sandbox:
// the local backend runs as the caller; the docker backend isolates by
// container, user and limits, and the Policy is defence in depth only.
//
// Errors are classified by sentinel values (ErrPathEscape, ErrRefused,
// ErrNotUnique, ...) and the typed *PathError and *PolicyError; check them
// with errors.Is and errors.As.
package exec
