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
// # Environment
//
// A local command starts from a base environment taken from the
// controller's (PATH, HOME, USER, LOGNAME, SHELL, TERM, TZ, TMPDIR, LANG,
// LANGUAGE, LC_*, XDG_* and the CA certificate paths SSL_CERT_FILE,
// SSL_CERT_DIR, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, CURL_CA_BUNDLE;
// see baseEnv), not from its whole environment, where store credentials,
// tokens and proxy URLs live, unless Options.InheritEnv; a docker command
// from the image's. Either way a local command never gets agentfs's own
// secrets (AGENTFS_KEY, AGENTFS_PASSPHRASE, AGENTFS_NEW_KEY,
// AGENTFS_NEW_PASSPHRASE, AGENTFS_TOKEN; see secretVars) from the
// controller's environment. Options.Env, then Request.Env, are added to it
// (and may set those).
//
// # Working directory
//
// Request.Cwd is checked (resolve) and then entered without resolving its
// name again, so that a concurrent rename swapping it for a symlink cannot
// start the command elsewhere. The local backend opens it through the
// workspace's os.Root (O_PATH) and the child enters it as
// /proc/self/fd/N before it executes the program (see fdDir). The docker
// backend cannot hand a descriptor to a docker exec: its wrapper script
// starts at the /workspace mount point, enters the directory with cd -P and
// checks the directory it is in, climbing with cd -P .. and comparing with
// test -ef, before it runs the command; if a swap led it out of the
// backend's root, the command is not run and exits 126.
//
// # Seams for an agentfs mount
//
// Two interfaces connect a backend to the filesystem beneath it: Syncer, the
// sync barrier called after every command (so that what it wrote is in blob
// storage when Exec returns), and ChangeTracker, which lists what a command
// created, modified and deleted (WalkTracker walks a plain directory twice;
// for an agentfs mount, internal/mountexec's CheckpointTracker checkpoints
// the mount before and after the command and diffs the two commits, so its
// cost follows the size of the change, not of the tree). Both are Options.
//
// # What this package must never do
//
// It never imports the layers below it that serve the mount (cache,
// overlay, fs, go-fuse; depguard rules "exec" and "exec-code" in
// .golangci.yml enforce it, tests included, which reach a mount only through
// fs/fstest's separate server process): a backend runs in the CLI or library process, never in the
// process that serves the mount, since forking a child whose cwd is on a
// FUSE mount from that mount's own server can deadlock. It is no sandbox:
// the local backend runs as the caller; the docker backend isolates by
// container, user and limits, and the Policy is defence in depth only.
//
// Errors are classified by sentinel values (ErrPathEscape, ErrRefused,
// ErrNotUnique, ...) and the typed *PathError and *PolicyError; check them
// with errors.Is and errors.As.
package exec
