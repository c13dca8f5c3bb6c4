package exec

// Lock order: shared.mu, then Job.mu, then capture.mu. No lock is held while
// a driver call, a Syncer or a ChangeTracker runs.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults used when the corresponding Options or Request field is zero.
const (
	// DefaultOutputLimit caps the output a Result keeps (stdout and stderr
	// together) when neither Request.OutputLimit nor Options.OutputLimit is
	// set.
	DefaultOutputLimit = 1 << 20
	// DefaultShell runs Request.Command as DefaultShell -c COMMAND.
	DefaultShell = "/bin/sh"
	// DefaultSyncTimeout bounds each Syncer.Sync call.
	DefaultSyncTimeout = 5 * time.Minute
	// DefaultReadLimit is the number of lines Read returns when its limit
	// is 0.
	DefaultReadLimit = 2000
	// DefaultGrepLimit is the number of matches Grep returns when
	// GrepOptions.MaxResults is 0.
	DefaultGrepLimit = 1000
)

// envTag is the environment variable that marks every process a command
// starts, so that a kill can find the ones that left its session.
const envTag = "AGENTFS_EXEC_ID"

// Options configure a Backend. The zero value is valid: no default timeout,
// a 1 MiB output cap, no policy, no sync barrier, WalkTracker change lists.
type Options struct {
	// Env is added to the environment of every command. The local backend
	// starts from a base environment taken from the controller's: PATH
	// (DefaultPath if it has none), HOME, USER, LOGNAME, SHELL, TERM, TZ,
	// TMPDIR, LANG, LANGUAGE, LC_*, XDG_* and the CA certificate paths
	// (SSL_CERT_FILE, ...), none of the variables where credentials live
	// (AWS_SECRET_ACCESS_KEY, tokens, proxy URLs, AGENTFS_*); or, with
	// InheritEnv, from the controller's whole environment but agentfs's own
	// secrets (AGENTFS_KEY, AGENTFS_TOKEN, ...), which only Env or
	// Request.Env can set. The docker backend starts from the image's.
	Env map[string]string
	// InheritEnv makes the local backend start every command from the
	// controller's whole environment (os.Environ, without agentfs's own
	// secrets) instead of the base environment: right for a controller that runs its own user's
	// commands (agentfs exec, agentfs run), not for one that runs an
	// agent's (agentfs serve, unless --inherit-env), whose environment may
	// hold store credentials. The docker backend ignores it.
	InheritEnv bool
	// Timeout applies to a Request whose Timeout is 0; 0 means none.
	Timeout time.Duration
	// OutputLimit applies to a Request whose OutputLimit is 0; 0 means
	// DefaultOutputLimit, a negative value means no cap.
	OutputLimit int64
	// Policy, when set, is asked before every command (Exec and Start);
	// nil means every command runs. See DenyDangerous.
	Policy Policy
	// Syncer is the sync barrier called after every command; nil means
	// none (right for plain directories).
	Syncer Syncer
	// ChangeTracker computes Result.Changes; nil means a WalkTracker over
	// the workspace root. Use NoChanges to turn change lists off.
	ChangeTracker ChangeTracker
	// SyncTimeout bounds each Syncer.Sync call; 0 means DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Shell runs Request.Command (as Shell -c COMMAND); "" means
	// DefaultShell. For the docker backend it is a path inside the image.
	Shell string
}

// Request describes one command. Exactly one of Command and Argv is set.
type Request struct {
	// Command is a shell command line, run as Options.Shell -c Command.
	Command string
	// Argv is a program and its arguments, run without a shell. The
	// program is looked up in PATH when it has no slash; a relative path
	// with a slash is relative to Cwd.
	Argv []string
	// Env is added to the backend's environment for this command (and
	// wins over Options.Env).
	Env map[string]string
	// Cwd is the working directory relative to the backend's root ("" for
	// the root). It must exist, be a directory and stay inside the root:
	// absolute paths, ".." out of the root and symlinks pointing out are
	// refused with a *PathError. The command starts in the directory that
	// was checked, whatever is renamed meanwhile: the local backend holds it
	// open and enters it by descriptor; the docker backend enters it by
	// name in the container and then checks the directory it is in, so a
	// concurrent swap for a link out of the backend's root makes the
	// command exit 126, not run, with a message on stderr.
	Cwd string
	// Timeout kills the command's whole process tree after this long; 0
	// means Options.Timeout, a negative value means none.
	Timeout time.Duration
	// Stdin, when set, is the command's standard input; nil means an empty
	// input. A reader that is not an *os.File is copied by a goroutine that
	// ends when its Read returns after the command has exited.
	Stdin io.Reader
	// OutputLimit caps the bytes kept (stdout and stderr together); 0
	// means Options.OutputLimit, a negative value means no cap. Output past
	// the cap is read and dropped, and Output.Truncated is set.
	OutputLimit int64
	// Stdout and Stderr, when set, receive the same bytes the result keeps,
	// as they arrive (so the cap applies to them too). Their write errors
	// are ignored. They are called from the backend's reader goroutines,
	// never concurrently with each other.
	Stdout, Stderr io.Writer
	// DiscardOutput keeps no output in the Result (or a Job's Output):
	// Stdout and Stderr still receive it, up to the cap, and Truncated
	// still reports the cap. For streaming large outputs.
	DiscardOutput bool
}

// display is the command as one line, for policies, logs and job lists.
func (r *Request) display() string {
	if r.Command != "" {
		return r.Command
	}
	return shellJoin(r.Argv)
}

// Output is what a command printed, capped at the request's output limit.
type Output struct {
	Stdout []byte
	Stderr []byte
	// Merged is stdout and stderr interleaved in the order the backend
	// received them. The docker backend receives one multiplexed stream,
	// so the order is the daemon's; the local backend reads two pipes, so
	// writes to different streams within microseconds of each other may
	// appear swapped.
	Merged []byte
	// Truncated is set when output past the limit was dropped.
	Truncated bool
}

// Result is the outcome of a command that ran.
type Result struct {
	// ExitCode is the command's exit status; a command killed by signal N
	// reports 128+N, as shells do (137 for a timeout's SIGKILL). A program
	// that cannot be found reports 127, one that cannot be executed 126.
	ExitCode int
	Output
	// TimedOut is set when the timeout killed the command.
	TimedOut bool
	// Duration runs from the start of the command to the end of its
	// process tree (sync and change list excluded).
	Duration time.Duration
	// Changes lists what the command created, modified and deleted under
	// the backend's root; nil when change tracking is off or failed.
	Changes *Changes
}

// Backend runs commands in a workspace directory and gives confined access
// to its files. It is created by NewLocal or NewDocker; Scope derives
// backends confined to a subdirectory that share its process, container and
// jobs. A Backend is safe for concurrent use.
type Backend struct {
	s      *shared
	prefix string // the scope: a clean, root-relative, slash-separated path; "" for the root
}

// shared is the state common to a backend and its scopes.
type shared struct {
	kind     string
	hostRoot string   // absolute host path of the workspace root, symlinks resolved
	root     *os.Root // the workspace root; every file operation goes through it
	drv      driver
	opts     Options // defaults applied
	owner    *owner  // when set, file operations chown what they create to it

	closing    context.Context // cancelled by Close: running commands are killed
	closeStart context.CancelFunc

	mu       sync.Mutex
	jobs     map[string]*Job // guarded by mu
	nextJob  int             // guarded by mu
	closed   bool            // guarded by mu
	running  sync.WaitGroup  // one per command in flight; Add under mu while !closed
	closeMu  sync.Mutex      // serialises Close
	closeErr error           // guarded by closeMu
	done     bool            // guarded by closeMu
}

// owner is a uid:gid that new files and directories are given.
type owner struct{ uid, gid int }

// driver launches processes for one kind of backend.
type driver interface {
	// start launches spec and returns once the process runs. A program
	// that cannot be found or executed is not an error: the returned proc
	// exits with 127 or 126 and a message on stderr.
	start(ctx context.Context, spec *procSpec) (proc, error)
	// workdir is where the commands see the root-relative path rel.
	workdir(rel string) string
	// close releases the driver (for docker: removes the container).
	close(ctx context.Context) error
}

// procSpec is one command as a driver sees it.
type procSpec struct {
	argv []string
	env  map[string]string // the request's additions
	dir  string            // root-relative working directory, resolved
	// dirFile is dir, opened (O_PATH) through the root when it was checked;
	// it stays open until start returns. The local driver starts the
	// command in it; the docker driver, which cannot pass a descriptor into
	// the container, enters dir by name and checks that it landed inside
	// scope (see wrapperScript).
	dirFile *os.File
	scope   string // root-relative directory the command must stay in ("." for the root)
	stdin   io.Reader
	stdout  io.Writer // never fail; never called concurrently with stderr
	stderr  io.Writer
	tag     string // value of envTag for this command
}

// proc is a running command.
type proc interface {
	// wait returns once the main process has exited, everything it left
	// running has been killed and its output has been drained. It is
	// called once.
	wait() (exitCode int, err error)
	// kill kills the whole process tree with SIGKILL. It may be called
	// concurrently with wait and more than once.
	kill(ctx context.Context) error
}

// newBackend assembles the parts every constructor shares.
func newBackend(kind, dir string, opts Options, drv func(hostRoot string) (driver, error)) (*Backend, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	hostRoot, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	fi, err := os.Stat(hostRoot)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %q: %w: not a directory", dir, ErrInvalid)
	}
	root, err := os.OpenRoot(hostRoot)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	if opts.OutputLimit == 0 {
		opts.OutputLimit = DefaultOutputLimit
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.Shell == "" {
		opts.Shell = DefaultShell
	}
	if opts.ChangeTracker == nil {
		opts.ChangeTracker = &WalkTracker{Root: hostRoot}
	}
	d, err := drv(hostRoot)
	if err != nil {
		_ = root.Close()
		return nil, err
	}
	s := &shared{kind: kind, hostRoot: hostRoot, root: root, drv: d, opts: opts, jobs: map[string]*Job{}}
	s.closing, s.closeStart = context.WithCancel(context.Background())
	return &Backend{s: s}, nil
}

// Kind is "local" or "docker".
func (b *Backend) Kind() string { return b.s.kind }

// Root is the host path of this backend's root (the workspace root, or the
// scope's directory), symlinks resolved.
func (b *Backend) Root() string {
	if b.prefix == "" {
		return b.s.hostRoot
	}
	return filepath.Join(b.s.hostRoot, filepath.FromSlash(b.prefix))
}

// WorkDir is the path at which commands see this backend's root: the host
// path for local, under /workspace for docker.
func (b *Backend) WorkDir() string { return b.s.drv.workdir(b.relOrDot()) }

func (b *Backend) relOrDot() string {
	if b.prefix == "" {
		return "."
	}
	return b.prefix
}

// Scope returns a backend confined to subdir (relative to b's root), which
// must be an existing directory inside it; symlinks are resolved and may not
// lead out. Its paths, Cwd and change lists are relative to subdir; it
// shares b's process, container, policy, sync barrier and job table (Jobs on
// a scope lists the jobs started through it or its own scopes). Scopes nest.
// Closing a scope does nothing; closing the backend it came from ends it.
func (b *Backend) Scope(subdir string) (*Backend, error) {
	if err := b.check(context.Background()); err != nil {
		return nil, err
	}
	rel, err := b.resolve("scope", subdir, true)
	if err != nil {
		return nil, err
	}
	fi, err := b.s.root.Stat(rel)
	if err != nil {
		return nil, b.errPathOp("scope", subdir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("scope %q: %w: not a directory", subdir, ErrInvalid)
	}
	if rel == "." {
		rel = ""
	}
	return &Backend{s: b.s, prefix: rel}, nil
}

// check returns ErrClosed once the backend is closed, and ctx's error.
func (b *Backend) check(ctx context.Context) error {
	b.s.mu.Lock()
	closed := b.s.closed
	b.s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ctx.Err()
}

// Sync calls the sync barrier (Options.Syncer), if any, so that file
// operations done since the last command are durable too. It returns an
// error wrapping ErrSync when the barrier fails.
func (b *Backend) Sync(ctx context.Context) error {
	if err := b.check(ctx); err != nil {
		return err
	}
	if b.s.opts.Syncer == nil {
		return nil
	}
	if err := b.s.opts.Syncer.Sync(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrSync, err)
	}
	return nil
}

// Exec runs req and returns once its whole process tree is gone, the sync
// barrier has returned and the change list is computed.
//
// A non-zero exit code is not an error. Exec returns an error and a nil
// Result when the command could not be started: a *PathError (Cwd), a
// *PolicyError, ErrInvalid, ErrClosed, or a driver failure. When ctx is
// cancelled or the backend closes while the command runs, the process tree is
// killed and Exec returns the Result so far with ctx's error (or ErrClosed).
// A failed sync barrier or change list is reported as ErrSync or ErrChanges
// alongside the Result. On timeout the tree is killed, Result.TimedOut is
// set and the error is nil.
func (b *Backend) Exec(ctx context.Context, req Request) (*Result, error) {
	r, err := b.launch(ctx, &req)
	if err != nil {
		return nil, err
	}
	defer b.s.running.Done()
	return r.finish(ctx, true)
}

// launch validates req, starts the command and returns the run that
// finish completes. On success the caller must call finish.
func (b *Backend) launch(ctx context.Context, req *Request) (*run, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if (req.Command == "") == (len(req.Argv) == 0) {
		return nil, fmt.Errorf("exec: %w: set exactly one of Command and Argv", ErrInvalid)
	}
	if len(req.Argv) > 0 && req.Argv[0] == "" {
		return nil, fmt.Errorf("exec: %w: empty program name", ErrInvalid)
	}
	if p := b.s.opts.Policy; p != nil {
		if err := p.Check(req); err != nil {
			return nil, err
		}
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = "."
	}
	dir, err := b.resolve("cwd", cwd, true)
	if err != nil {
		return nil, err
	}
	// The checked directory is held open and the command started in it by
	// this descriptor: its name is not resolved again (see openDir).
	dirFile, err := b.openDir("cwd", cwd, dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = dirFile.Close() }()
	argv := req.Argv
	if req.Command != "" {
		argv = []string{b.s.opts.Shell, "-c", req.Command}
	}
	limit := req.OutputLimit
	if limit == 0 {
		limit = b.s.opts.OutputLimit
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = b.s.opts.Timeout
	}
	tag, err := randomHex(8)
	if err != nil {
		return nil, err
	}

	b.s.mu.Lock()
	if b.s.closed {
		b.s.mu.Unlock()
		return nil, ErrClosed
	}
	b.s.running.Add(1)
	b.s.mu.Unlock()

	r := &run{b: b, timeout: timeout, out: newCapture(limit, !req.DiscardOutput, req.Stdout, req.Stderr)}
	scope := b.prefix
	r.mark, err = b.s.opts.ChangeTracker.Begin(ctx, scope)
	if err != nil {
		b.s.running.Done()
		return nil, fmt.Errorf("%w: %w", ErrChanges, err)
	}
	spec := &procSpec{
		argv:    argv,
		env:     req.Env,
		dir:     dir,
		dirFile: dirFile,
		scope:   b.relOrDot(),
		stdin:   req.Stdin,
		stdout:  r.out.stream(streamStdout),
		stderr:  r.out.stream(streamStderr),
		tag:     tag,
	}
	r.start = time.Now()
	r.p, err = b.s.drv.start(ctx, spec)
	if err != nil {
		b.s.running.Done()
		return nil, err
	}
	return r, nil
}

// run is one started command.
type run struct {
	b       *Backend
	p       proc
	out     *capture
	mark    Mark
	timeout time.Duration
	start   time.Time
}

// finish waits for the command, killing its tree on timeout, on ctx's end
// and on Close, then runs the sync barrier and the change list. ctx's end
// is reported as an error only when cancelIsError is set. The caller ends
// the run's count in the backend's running group (launch added it) once
// it has published the result, so that Close, which waits on that group,
// returns only after every Exec and Job has reported its end.
func (r *run) finish(ctx context.Context, cancelIsError bool) (*Result, error) {
	var timer <-chan time.Time
	if r.timeout > 0 {
		t := time.NewTimer(r.timeout)
		defer t.Stop()
		timer = t.C
	}
	type outcome struct {
		code int
		err  error
	}
	waited := make(chan outcome, 1)
	go func() {
		code, err := r.p.wait()
		waited <- outcome{code, err}
	}()
	var (
		timedOut bool
		cause    error
		killErr  error
		o        outcome
	)
	done, closing := ctx.Done(), r.b.s.closing.Done()
	kill := func() {
		// The kill must finish even though ctx is over.
		kctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.p.kill(kctx); err != nil && killErr == nil {
			killErr = fmt.Errorf("killing the process tree: %w", err)
		}
	}
wait:
	for {
		select {
		case o = <-waited:
			break wait
		case <-timer:
			timer, timedOut = nil, true
			kill()
		case <-done:
			done = nil
			if cancelIsError && cause == nil {
				cause = ctx.Err()
			}
			kill()
		case <-closing:
			closing = nil
			if cause == nil {
				cause = ErrClosed
			}
			kill()
		}
	}
	res := &Result{
		ExitCode: o.code,
		Output:   r.out.snapshot(),
		TimedOut: timedOut,
		Duration: time.Since(r.start),
	}
	errs := []error{cause, killErr, o.err}

	// The barrier and the change list run even when ctx is over: what the
	// command wrote before it was killed must be durable and listed.
	post := context.WithoutCancel(ctx)
	if s := r.b.s.opts.Syncer; s != nil {
		sctx, cancel := context.WithTimeout(post, r.b.s.opts.SyncTimeout)
		err := s.Sync(sctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrSync, err))
		}
	}
	ch, err := r.b.s.opts.ChangeTracker.Changes(post, r.mark)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrChanges, err))
	} else {
		res.Changes = ch
	}
	return res, errors.Join(errs...)
}

// Close kills every running command and job of the backend (and of its
// scopes), waits for them, releases the driver (the docker backend removes
// its container) and closes the root. Later calls on the backend return
// ErrClosed. Close is idempotent; on a scope it does nothing and returns nil.
func (b *Backend) Close() error {
	if b.prefix != "" {
		return nil
	}
	s := b.s
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.done {
		return s.closeErr
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.closeStart()
	s.running.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.closeErr = errors.Join(s.drv.close(ctx), s.root.Close())
	s.done = true
	return s.closeErr
}

// randomHex returns n random bytes, hex-encoded.
func randomHex(n int) (string, error) {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("random id: %w", err)
	}
	return hex.EncodeToString(buf), nil
}

// mergeEnv returns base with add applied (add wins), as K=V strings, sorted
// by key for determinism.
func mergeEnv(base []string, add ...map[string]string) []string {
	m := map[string]string{}
	var order []string
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := m[k]; !ok {
			order = append(order, k)
		}
		m[k] = v
	}
	for _, a := range add {
		for k, v := range a {
			if _, ok := m[k]; !ok {
				order = append(order, k)
			}
			m[k] = v
		}
	}
	sort.Strings(order)
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+m[k])
	}
	return out
}

// envList turns a map into sorted K=V strings.
func envList(m map[string]string) []string { return mergeEnv(nil, m) }

// shellJoin quotes argv for display as one shell line.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, needsQuote) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// needsQuote reports whether r is special to the shell.
func needsQuote(r rune) bool {
	switch {
	case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		return false
	}
	return !strings.ContainsRune("-_./=:,+@", r)
}

// jobNumber orders job ids ("job-12") numerically.
func jobNumber(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "job-"))
	return n
}

// within reports whether the root-relative path p is scope or below it.
func within(p, scope string) bool {
	return scope == "" || p == scope || strings.HasPrefix(p, scope+"/")
}
