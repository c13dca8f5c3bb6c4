package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/mountd"
	"github.com/agentfs/agentfs/internal/mountproc"
	"github.com/agentfs/agentfs/internal/volkey"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newMountCmd) }

// mountFlags are the options of `agentfs mount`.
type mountFlags struct {
	background         bool
	cacheDir           string
	readOnly           bool
	nonempty           bool
	cacheSize          int64
	checkpointInterval time.Duration
	branch             string
	debug              bool
	pprof              string
	metrics            string
	tune               string
	atime              string
	dev, suid          bool
	readyFD            int    // internal: the background parent's pipe
	secretsFD          int    // internal: the pipe of the server's secrets (mountproc.ReadSecrets)
	keyFile            string // --key-file
	branchSet          bool

	virtual bool   // --virtual
	base    string // --base: a reference or a host directory
	name    string // --name: the virtual workspace
}

func newMountCmd() *cobra.Command {
	var f mountFlags
	c := &cobra.Command{
		Use:   "mount [URL] MOUNTPOINT",
		Short: "Mount a volume on a directory",
		Long: `Mount the volume at URL on MOUNTPOINT and serve it until it is unmounted
(agentfs umount, or SIGTERM/SIGINT to the server: both sync, unmount and exit 0).

Without URL, the embedded default store is used: a local directory in your data
directory ($XDG_DATA_HOME/agentfs/default, or ~/.local/share/agentfs/default),
initialized on first use. MOUNTPOINT is created if missing; a stale mount left
there by a killed server ("transport endpoint is not connected") is cleaned up
first. A MOUNTPOINT that is not empty is refused: the mount would hide its
files until it is unmounted (--nonempty mounts over them anyway).

The mount serves in the foreground; with -d/--background, agentfs returns as
soon as the mount is ready and leaves a server process running (its log is
mount.log in the cache directory). The server never runs commands inside the
mount.

Every mount keeps a local cache directory (metadata and data): by default one
per store URL and branch under $XDG_CACHE_HOME/agentfs/mounts. Mounting again
with the same cache directory starts where the last mount stopped, including
after a crash: everything fsynced is there.

Writes reach the blob store by themselves every --checkpoint-interval, on
` + "`agentfs sync MOUNTPOINT`" + `, and at unmount. One writer per branch: a second
read-write mount of a branch fails and names the holder; --read-only mounts
need no lease.

The mount uses allow_other and default_permissions, so containers that
bind-mount it (docker run -v MOUNTPOINT:/workspace) can use it as any user,
with the files' modes enforced by the kernel.

With --virtual, the mount is a copy-on-write workspace over --base: a
snapshot or branch of the volume, or a directory on this host, which nothing
the workspace does modifies. Reads come from the base until a path is
written; every change is kept in the workspace (a branch of the volume,
virtual-NAME, as durable as any other write) until ` + "`agentfs commit`" + `
accepts it or ` + "`agentfs discard`" + ` drops it; ` + "`agentfs diff`" + ` lists
it. Without --base, the base is the head of --branch now. Mounting on the same
directory again finds the same workspace (its name derives from this host and
the mount point; --name chooses one). This is copy-on-write, not mere path
confinement.`,
		Example: `  agentfs mount ./workspace                      # the default local store
  agentfs mount -d file:///srv/agentfs/vol /mnt/ws
  agentfs mount -d --read-only 's3://bucket/ws?region=eu-west-1' /mnt/ro
  agentfs mount -d --virtual --base ~/src/project ./ws   # over a host directory
  agentfs mount -d --virtual --base snapshot:v1 file:///srv/agentfs/vol ./try
  agentfs umount /mnt/ws`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			url, mnt := "", args[len(args)-1]
			if len(args) == 2 {
				url = args[0]
			}
			f.branchSet = cmd.Flags().Changed("branch")
			if f.checkpointInterval == 0 {
				return usageErrorf(cmd, "--checkpoint-interval 0: give a positive interval, or a negative one to commit only on sync and unmount")
			}
			return runMount(cmd, url, mnt, f)
		},
	}
	fl := c.Flags()
	fl.BoolVarP(&f.background, "background", "d", false, "return once the mount is ready, leaving the server running")
	fl.StringVar(&f.keyFile, keyFileFlag, "", keyFileUsage)
	fl.StringVar(&f.cacheDir, "cache-dir", "", "local cache `DIR` (default: derived from URL and branch under the user cache directory)")
	fl.BoolVar(&f.readOnly, "read-only", false, "mount read-only (no writer lease; every change fails with EROFS)")
	fl.BoolVar(&f.nonempty, "nonempty", false, "mount even if MOUNTPOINT is not empty (its files are hidden until unmount)")
	fl.Var(byteSizeFlag{&f.cacheSize}, "cache-size", "bound on clean cached data, e.g. 20G (default 10G)")
	fl.DurationVar(&f.checkpointInterval, "checkpoint-interval", 5*time.Second, "how often changes are committed to the store (negative: only on sync and unmount)")
	fl.StringVar(&f.branch, "branch", snapshot.DefaultBranch, "branch to mount")
	fl.BoolVar(&f.debug, "debug", false, "log every FUSE request (very verbose)")
	fl.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics (blob store, volume, FUSE requests, branch and snapshot counts) at http://`ADDR`/metrics, e.g. 127.0.0.1:9567 (they are on the control socket too: curl --unix-socket CACHE_DIR/control.sock http://agentfs/metrics)")
	fl.StringVar(&f.pprof, "pprof", "", "serve Go profiles (net/http/pprof) on this local `ADDR`, e.g. 127.0.0.1:6060")
	_ = fl.MarkHidden("pprof")
	fl.StringVar(&f.tune, "tune", "", "override FUSE settings for experiments: comma-separated `KEY=VALUE` among writeback, keepcache, dircache, posixacl, flush, directwrite, passthrough (0|1), maxwrite, readahead (bytes), background, readahead_kb (see go doc ./fs). passthrough=1 lets the kernel read files whole in the local cache from their cached data file without the server (FUSE passthrough; needs root and Linux 6.9 or later; off by default; such files stay pinned until the kernel forgets them, at most half of --cache-size and 1,024 files, beyond which reads go through the server; what a shared writable mmap of such a file writes is recorded at the next checkpoint, sync, unmount or fsync, and lost if the server is killed first)")
	fl.StringVar(&f.atime, "atime", "noatime", "when reads update access times: `MODE` noatime (never; the default: an update costs a database write and dirties the file for the next commit), relatime (when the access time is not later than the modification or change time, or a day old; Linux's default on local disks) or strictatime (at every open for reading)")
	fl.BoolVar(&f.dev, "dev", false, "let device nodes in the mount reach their devices (off: opening one fails with EACCES). Anyone who can create a device node in the volume (root in a container bind-mounting it, whoever writes the store) could otherwise read and write any disk or memory of this machine through it; turn it on only for volumes whose writers you trust as root here. Needs root")
	fl.BoolVar(&f.suid, "suid", false, "honour set-user-ID/set-group-ID bits and file capabilities of programs run from the mount (off: they run with the caller's privileges). A volume's files may come from a shared store, a snapshot or a container; with --suid any set-user-ID-root program in it is a root shell for every local user, so turn it on only for volumes whose writers you trust as root here. Needs root")
	fl.BoolVar(&f.virtual, "virtual", false, "mount a copy-on-write workspace over --base (see `agentfs diff`, `commit`, `discard`)")
	fl.StringVar(&f.base, "base", "", "with --virtual: what the workspace is over, a `REF` (snapshot:NAME, branch:NAME[@SEQ], NAME) or a host directory (a path with a '/': ./proj, /src/proj); default: the head of --branch")
	fl.StringVar(&f.name, "name", "", "with --virtual: the workspace's `NAME` (default: derived from this host and the mount point, so mounting there again finds its changes)")
	fl.IntVar(&f.readyFD, "ready-fd", 0, "internal: report readiness on this descriptor")
	_ = fl.MarkHidden("ready-fd")
	fl.IntVar(&f.secretsFD, "secrets-fd", 0, "internal: read the volume's key and the store URL from this descriptor")
	_ = fl.MarkHidden("secrets-fd")
	return c
}

// mountTarget is a resolved mount request.
type mountTarget struct {
	url       string // as given, or the default store's
	isDefault bool
	mnt       string // absolute, symlinks resolved
	cacheDir  string
	branch    string         // the branch to mount: --branch, or the virtual workspace's
	virtual   *virtualTarget // nil unless --virtual
}

// resolveMount fills in the defaults and prepares the mount point: it is
// created if missing, a stale mount on it is cleaned up, and a live mount
// on it is an error.
func resolveMount(ctx context.Context, url, mnt string, f mountFlags, stderr io.Writer) (mountTarget, error) {
	t := mountTarget{url: url}
	if t.url == "" {
		u, err := mountproc.DefaultStoreURL()
		if err != nil {
			return t, err
		}
		t.url, t.isDefault = u, true
	}
	abs, err := filepath.Abs(mnt)
	if err != nil {
		return t, err
	}
	stale, err := mountproc.CleanStale(ctx, abs)
	if err != nil {
		return t, err
	}
	if stale {
		_, _ = fmt.Fprintf(stderr, "agentfs: cleaned up a stale mount on %s (its server had died)\n", abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return t, fmt.Errorf("create mount point: %w", err)
	}
	if t.mnt, err = filepath.EvalSymlinks(abs); err != nil {
		return t, fmt.Errorf("mount point: %w", err)
	}
	if st, err := os.Stat(t.mnt); err != nil {
		return t, fmt.Errorf("mount point: %w", err)
	} else if !st.IsDir() {
		return t, fmt.Errorf("mount point %s is not a directory", t.mnt)
	}
	if on, err := afs.IsMountPoint(t.mnt); err != nil {
		return t, err
	} else if on {
		if c, err := control.Find(ctx, t.mnt); err == nil {
			info, _ := c.Info(ctx)
			return t, fmt.Errorf("%s is already an agentfs mount of %s (server pid %d); unmount it first with `agentfs umount %s`",
				t.mnt, info.URL, info.PID, t.mnt)
		}
		return t, fmt.Errorf("%s is already a mount point; unmount it first", t.mnt)
	}
	if !f.nonempty {
		if err := checkEmpty(t.mnt); err != nil {
			return t, err
		}
	}
	t.branch = f.branch
	if t.virtual, err = resolveVirtual(t.mnt, f); err != nil {
		return t, err
	}
	if t.virtual != nil {
		t.branch = overlay.BranchName(t.virtual.name)
	}
	t.cacheDir = f.cacheDir
	if t.cacheDir == "" {
		if t.cacheDir, err = defaultCacheDir(t.url, t.branch); err != nil {
			return t, err
		}
	}
	if t.cacheDir, err = filepath.Abs(t.cacheDir); err != nil {
		return t, err
	}
	if strings.ContainsAny(t.cacheDir, ",\n") {
		return t, fmt.Errorf("cache dir %q: a comma or newline in its path cannot be named in the mount table; choose another --cache-dir", t.cacheDir)
	}
	if within(t.cacheDir, t.mnt) {
		return t, fmt.Errorf("cache dir %s lies inside the mount point %s; choose another --cache-dir", t.cacheDir, t.mnt)
	}
	if t.virtual != nil && t.virtual.base.HostDir != "" && within(t.cacheDir, t.virtual.base.HostDir) {
		return t, fmt.Errorf("cache dir %s lies inside the base directory %s (the workspace would see its own cache); choose another --cache-dir", t.cacheDir, t.virtual.base.HostDir)
	}
	if err := os.MkdirAll(t.cacheDir, 0o700); err != nil {
		return t, fmt.Errorf("cache dir: %w", err)
	}
	return t, nil
}

// checkEmpty fails if directory dir has entries, naming a few of them.
func checkEmpty(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("mount point: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mount point %s: %w", dir, err)
	}
	if len(names) == 0 {
		return nil
	}
	what := strings.Join(names[:min(len(names), 3)], ", ")
	if len(names) > 3 {
		what += ", ..."
	}
	return fmt.Errorf("mount point %s is not empty (it holds %s): the mount would hide those files until it is unmounted; "+
		"choose an empty or new directory, or pass --nonempty to mount over them", dir, what)
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

func runMount(cmd *cobra.Command, url, mnt string, f mountFlags) error {
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	if _, err := afs.ParseAtime(f.atime); err != nil {
		return fmt.Errorf("--atime: %w", err)
	}
	if f.readyFD > 0 {
		return serveBackground(ctx, url, mnt, f)
	}
	if f.secretsFD > 0 {
		return usageErrorf(cmd, "--secrets-fd goes with --ready-fd (both are internal)")
	}
	if !f.background {
		reexecAsServer(stderr)
	}
	t, err := resolveMount(ctx, url, mnt, f, stderr)
	if err != nil {
		return err
	}
	if f.background {
		return startBackground(ctx, t, f, stderr)
	}
	lg := newMountLogger(stderr, f.debug)
	return serveMount(ctx, t, f, volkey.Default(f.keyFile), lg, func(info control.Info) {
		_, _ = fmt.Fprintf(stderr, "agentfs: serving %s (branch %s%s) on %s; Ctrl-C or `agentfs umount %s` to unmount\n",
			info.URL, info.Branch, roSuffix(info.ReadOnly)+virtualSuffix(info.Virtual), info.MountPoint, info.MountPoint)
	})
}

func roSuffix(ro bool) string {
	if ro {
		return ", read-only"
	}
	return ""
}

func newMountLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// startBackground runs the server as a new session of this executable and
// waits until it reports the mount ready (or failed).
func startBackground(ctx context.Context, t mountTarget, f mountFlags, stderr io.Writer) error {
	flags := []string{"--checkpoint-interval=" + f.checkpointInterval.String()}
	if f.branchSet {
		flags = append(flags, "--branch="+f.branch)
	}
	if v := t.virtual; v != nil {
		// Resolved: the server runs in "/", and derives no name of its own.
		flags = append(flags, "--virtual", "--name="+v.name)
		if v.baseArg != "" {
			flags = append(flags, "--base="+v.baseArg)
		}
	}
	if f.readOnly {
		flags = append(flags, "--read-only")
	}
	if f.nonempty {
		flags = append(flags, "--nonempty")
	}
	if f.cacheSize > 0 {
		flags = append(flags, "--cache-size="+strconv.FormatInt(f.cacheSize, 10))
	}
	if f.debug {
		flags = append(flags, "--debug")
	}
	if f.keyFile != "" {
		flags = append(flags, "--"+keyFileFlag+"="+volkey.AbsKeyFile(f.keyFile))
	}
	if f.pprof != "" {
		flags = append(flags, "--pprof="+f.pprof)
	}
	if f.metrics != "" {
		flags = append(flags, "--metrics="+f.metrics)
	}
	if f.tune != "" {
		flags = append(flags, "--tune="+f.tune)
	}
	if f.atime != "" {
		flags = append(flags, "--atime="+f.atime)
	}
	if f.dev {
		flags = append(flags, "--dev")
	}
	if f.suid {
		flags = append(flags, "--suid")
	}
	spec := mountproc.Spec{MountPoint: t.mnt, CacheDir: t.cacheDir, Flags: flags}
	if !t.isDefault {
		spec.URL = t.url
	}
	p, err := mountproc.Start(ctx, spec)
	if err != nil {
		return err
	}
	what := blobDisplay(t.url)
	if t.virtual != nil {
		what = "virtual workspace " + t.virtual.name + " of " + what
	}
	_, _ = fmt.Fprintf(stderr, "agentfs: mounted %s on %s (server pid %d, log %s)\n",
		what, t.mnt, p.PID, p.Log)
	return nil
}

// mayReexec is set by main: the process is the agentfs command itself,
// which reexecAsServer may replace. A test binary that runs commands in
// process (runCLI) leaves it false: re-executing it would start its tests
// over.
var mayReexec bool

// reexecAsServer replaces this process, about to serve a mount in the
// foreground, by the same command with the runtime setting every mount
// server runs with (mountproc.ServerEnv), which the Go runtime reads only
// at start. It does nothing when the environment already has it (the
// second time, or the user's own GODEBUG=madvdontneed), or in a process
// that is not the agentfs command (mayReexec); when the exec fails it
// says so on stderr and the mount is served without it.
func reexecAsServer(stderr io.Writer) {
	env := os.Environ()
	if !mayReexec || mountproc.HasServerEnv(env) {
		return
	}
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, mountproc.ServerEnv(env))
	}
	_, _ = fmt.Fprintf(stderr, "agentfs: serving without GODEBUG=madvdontneed=0 (re-executing %s failed: %v)\n", exe, err)
}

// serveBackground is the server side of --background (mountproc.Start):
// it makes itself undumpable, so that no other process of the user reads
// its secrets pipe or memory meanwhile, reads its secrets from fd
// f.secretsFD (the store URL, the volume's key, which are not in its
// environment), serves the mount and tells the parent on fd f.readyFD
// whether the mount is ready ("ok") or why it failed. Without
// --secrets-fd (an agentfs from before it, which passed the URL in the
// environment) or with its secrets cut short it fails: with no URL it
// would otherwise mount the default store.
func serveBackground(ctx context.Context, url, mnt string, f mountFlags) error {
	ready := os.NewFile(uintptr(f.readyFD), "ready")
	if ready == nil {
		return fmt.Errorf("--ready-fd %d is not open", f.readyFD)
	}
	var once sync.Once
	report := func(msg string) {
		once.Do(func() {
			_, _ = io.WriteString(ready, msg+"\n")
			_ = ready.Close()
		})
	}
	var secrets map[string]string
	err := undumpable()
	if err == nil && f.secretsFD <= 0 {
		err = errors.New("this mount server was started by an older agentfs without --secrets-fd; " +
			"restart the agentfs process that started it (agentfs serve / mcp) after an upgrade")
	}
	if err == nil {
		secrets, err = mountproc.ReadSecrets(f.secretsFD)
	}
	if u := secrets[mountproc.URLSecret]; u != "" && url == "" {
		url = u
	}
	keys := volkey.Default(f.keyFile)
	keys.Getenv = func(name string) string {
		if v, ok := secrets[name]; ok {
			return v
		}
		return os.Getenv(name)
	}
	lg := newMountLogger(os.Stderr, f.debug)
	var t mountTarget
	if err == nil {
		t, err = resolveMount(ctx, url, mnt, f, os.Stderr)
	}
	if err == nil {
		err = serveMount(ctx, t, f, keys, lg, func(info control.Info) {
			lg.Info("mount ready", "url", info.URL, "branch", info.Branch, "mount_point", info.MountPoint,
				"cache_dir", info.CacheDir, "read_only", info.ReadOnly, "virtual", virtualSuffix(info.Virtual))
			report("ok")
		})
	}
	if err != nil {
		report(err.Error())
		lg.Error("mount server failed", "err", err)
		return &exitError{code: 1}
	}
	return nil
}

// blobDisplay shows a store URL without credentials.
func blobDisplay(url string) string {
	if i := strings.Index(url, "?"); i >= 0 {
		url = url[:i]
	}
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			url = url[:j+3] + url[i+1:]
		}
	}
	return url
}

// serveMount serves the mount t with the options f (mountd.Serve) until
// it is gone, opening an encrypted volume with the key keys finds; ready
// is called once the mount is usable.
func serveMount(ctx context.Context, t mountTarget, f mountFlags, keys volkey.Source, lg *slog.Logger, ready func(control.Info)) error {
	if err := undumpable(); err != nil {
		return err
	}
	if f.pprof != "" {
		startPprof(f.pprof, lg)
	}
	tuning, err := afs.ParseTuning(f.tune)
	if err != nil {
		return err
	}
	atime, err := afs.ParseAtime(f.atime)
	if err != nil {
		return err
	}
	cfg := mountd.Config{
		URL: t.url, DefaultStore: t.isDefault, MountPoint: t.mnt, CacheDir: t.cacheDir, Branch: t.branch,
		ReadOnly: f.readOnly, CacheSize: f.cacheSize, CheckpointInterval: f.checkpointInterval,
		Tuning: tuning, Atime: atime, Dev: f.dev, Suid: f.suid, Debug: f.debug, Metrics: f.metrics,
		Keys: keys.Keys(), Version: versionString(), Logger: lg,
	}
	if v := t.virtual; v != nil {
		cfg.Virtual = &mountd.Virtual{Name: v.name, Base: v.base}
	}
	if s := os.Getenv(mountproc.OwnerEnv); s != "" {
		if cfg.OwnerPID, err = strconv.Atoi(s); err != nil || cfg.OwnerPID <= 0 {
			return fmt.Errorf("%s=%q is no process id", mountproc.OwnerEnv, s)
		}
	}
	err = mountd.Serve(ctx, cfg, ready)
	if errors.Is(err, snapshot.ErrLeaseHeld) && !f.readOnly {
		return fmt.Errorf("%w\n(to look at it while that writer runs: agentfs mount --read-only %s MOUNTPOINT)", err, blobDisplay(t.url))
	}
	return err
}
