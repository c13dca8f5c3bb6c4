package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// drainGrace bounds how long the local backend waits for the output pipes
// to close once the process tree is killed: only a process that escaped the
// sweep can still hold them.
const drainGrace = 2 * time.Second

// NewLocal returns a backend that runs commands as processes on this host,
// as the controller's own user, with the working directory inside dir
// (which must exist). File operations create files as that same user.
// Commands start from a base environment taken from the controller's (PATH,
// HOME, USER, LOGNAME, SHELL, TERM, TZ, TMPDIR, LANG, LANGUAGE, LC_*, XDG_*,
// CA certificate paths), or from its whole environment with
// opts.InheritEnv, never with agentfs's own secrets (AGENTFS_KEY, ...;
// opts.Env and a request's env may set them). The local backend is no
// sandbox: a command can reach anything the controller can (its files
// included, credential files too); only paths given to the backend itself
// are confined.
func NewLocal(dir string, opts Options) (*Backend, error) {
	return newBackend("local", dir, opts, func(hostRoot string) (driver, error) {
		if err := checkProcFD(hostRoot); err != nil {
			return nil, err
		}
		return &localDriver{hostRoot: hostRoot, baseEnv: localEnv(opts)}, nil
	})
}

type localDriver struct {
	hostRoot string
	baseEnv  []string
}

func (d *localDriver) workdir(rel string) string {
	return filepath.Join(d.hostRoot, filepath.FromSlash(rel))
}

func (d *localDriver) close(context.Context) error { return nil }

func (d *localDriver) start(_ context.Context, spec *procSpec) (proc, error) {
	env := mergeEnv(d.baseEnv, map[string]string{"PWD": d.workdir(spec.dir)}, spec.env, map[string]string{envTag: spec.tag})
	// The child enters the directory that was checked by its descriptor,
	// never by its name (see fdDir).
	dir := fdDir(spec.dirFile)
	prog, err := lookPath(spec.argv[0], env, dir)
	if err != nil {
		return notStarted(spec, err), nil
	}
	cmd := osexec.Command(prog, spec.argv[1:]...)
	cmd.Args[0] = spec.argv[0]
	cmd.Dir = dir
	cmd.Env = env
	// A session of its own: the command and every descendant that does
	// not call setsid itself share the session id = the command's pid.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("exec: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return nil, fmt.Errorf("exec: stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW

	var stdinW *os.File
	switch in := spec.stdin.(type) {
	case nil:
	case *os.File:
		cmd.Stdin = in
	default:
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(outR, outW, errR, errW)
			return nil, fmt.Errorf("exec: stdin pipe: %w", err)
		}
		cmd.Stdin, stdinW = r, w
	}

	if err := cmd.Start(); err != nil {
		closeAll(outR, outW, errR, errW, stdinW)
		if f, ok := cmd.Stdin.(*os.File); ok && stdinW != nil {
			_ = f.Close()
		}
		if errors.Is(err, osexec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) ||
			errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
			return notStarted(spec, err), nil
		}
		return nil, fmt.Errorf("exec %s: %w", spec.argv[0], err)
	}
	// The child has its copies; ours would keep the pipes open forever.
	closeAll(outW, errW)
	if stdinW != nil {
		_ = cmd.Stdin.(*os.File).Close()
	}

	p := &localProc{cmd: cmd, tag: spec.tag, outR: outR, errR: errR, stdinW: stdinW, drained: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(spec.stdout, outR) }()
	go func() { defer wg.Done(); _, _ = io.Copy(spec.stderr, errR) }()
	go func() { wg.Wait(); close(p.drained) }()
	if stdinW != nil {
		go func() {
			_, _ = io.Copy(stdinW, spec.stdin)
			_ = stdinW.Close()
		}()
	}
	return p, nil
}

// fdDir is the name under which a process started by this one enters the
// directory open as f: /proc/self/fd/N. It is race free because the child
// calls chdir(2) with it after fork and before it moves or closes any
// descriptor (syscall.forkAndExecInChild), when its descriptor table is a
// copy of ours: /proc/self is then the child, and its fd/N a magic link the
// kernel follows to the open directory itself, without walking any name.
// The parent holds f open until Start returns. checkProcFD makes sure /proc
// is there.
func fdDir(f *os.File) string {
	return "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
}

// checkProcFD makes sure that fdDir names the directory at dir in this
// process: without procfs at /proc, commands could not enter their
// directory.
func checkProcFD(dir string) error {
	f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("workspace %q: %w", dir, err)
	}
	defer func() { _ = f.Close() }()
	want, err := f.Stat()
	if err != nil {
		return fmt.Errorf("workspace %q: %w", dir, err)
	}
	const need = "the local backend needs procfs mounted at /proc to start commands in their directory; mount it (mount -t proc proc /proc)"
	got, err := os.Stat(fdDir(f))
	if err != nil {
		return fmt.Errorf("%s: %w", need, err)
	}
	if !os.SameFile(got, want) {
		return fmt.Errorf("%s: %s is not the workspace %s", need, fdDir(f), dir)
	}
	return nil
}

// lookPath finds prog as the command's own shell would: a name with a
// slash is taken as it is (a relative one is resolved by the child, relative
// to the directory it entered), any other is searched in the PATH of the
// command's environment (not the controller's), relative entries of PATH
// being relative to dir. The result always contains a slash, so that
// os/exec does not search it again.
func lookPath(prog string, env []string, dir string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	pathVar := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, d := range filepath.SplitList(pathVar) {
		if d == "" {
			d = "."
		}
		cand, at := filepath.Join(d, prog), filepath.Join(d, prog)
		if !filepath.IsAbs(d) {
			cand, at = "./"+cand, filepath.Join(dir, cand)
		}
		fi, err := os.Stat(at)
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return cand, nil
		}
	}
	return "", fmt.Errorf("%w: not found in PATH", osexec.ErrNotFound)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

// localProc is a command running on the host.
type localProc struct {
	cmd        *osexec.Cmd
	tag        string
	outR, errR *os.File
	stdinW     *os.File      // nil unless stdin is copied by a goroutine
	drained    chan struct{} // closed when both output pipes hit EOF
}

func (p *localProc) kill(ctx context.Context) error {
	return sweepHost(ctx, []int{p.cmd.Process.Pid}, p.tag)
}

func (p *localProc) wait() (int, error) {
	werr := p.cmd.Wait()
	code := 0
	if st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case st.Signaled():
			code = 128 + int(st.Signal())
		default:
			code = st.ExitStatus()
		}
	} else if werr != nil {
		return -1, fmt.Errorf("waiting for %s: %w", p.cmd.Path, werr)
	}
	// The main process is gone: whatever it left running goes too.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serr := sweepHost(ctx, []int{p.cmd.Process.Pid}, p.tag)
	if p.stdinW != nil {
		_ = p.stdinW.Close()
	}
	var derr error
	select {
	case <-p.drained:
	case <-time.After(drainGrace):
		derr = errors.New("output pipes still held open by a process that escaped the kill (it left the session and cleared AGENTFS_EXEC_ID); its output is dropped")
		closeAll(p.outR, p.errR)
		<-p.drained
	}
	closeAll(p.outR, p.errR)
	if serr != nil {
		serr = fmt.Errorf("killing what the command left running: %w", serr)
	}
	return code, errors.Join(serr, derr)
}

// notStarted is a command whose program could not be found or executed:
// it "exits" at once with 127 (not found) or 126 (not executable), the
// codes a shell uses, with the reason on stderr.
func notStarted(spec *procSpec, err error) proc {
	code := 127
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) {
		code = 126
	}
	_, _ = fmt.Fprintf(spec.stderr, "agentfs: %s: %v\n", spec.argv[0], err)
	return exited(code)
}

type exited int

func (e exited) wait() (int, error)         { return int(e), nil }
func (e exited) kill(context.Context) error { return nil }
