// Package mountd is the mount server: the process behind every agentfs
// mount (`agentfs mount`, its --background child, the servers
// internal/mountproc starts for exec and serve). Serve opens the volume,
// mounts it with the FUSE server (fs), answers its control socket
// (fs/control) with the volume, its history and, for a virtual mount, its
// workspace, runs the background gc of a read-write mount, and unmounts
// and closes the volume when asked (the control socket, a signal, or an
// unmount from outside).
//
// cmd/agentfs turns flags into a Config; everything the server does is
// here.
package mountd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache"
	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/mountproc"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

// Config is what a mount server serves, and how.
type Config struct {
	URL          string // the store
	DefaultStore bool   // URL is the embedded default store (made on first use)
	// Keys supplies the key of an encrypted volume (snapshot.OpenWithKey).
	Keys       snapshot.KeySource
	MountPoint string // absolute, symlinks resolved, an empty directory or --nonempty's
	CacheDir   string // absolute, created
	Branch     string // the branch to mount ("": the default); ignored for a virtual mount
	// Virtual is the workspace of a virtual mount; nil for a plain mount.
	Virtual *Virtual

	ReadOnly           bool
	CacheSize          int64         // bound of the local data cache (0: the engine's default)
	CheckpointInterval time.Duration // cache.Options.CheckpointInterval
	Tuning             afs.Tuning
	Atime              afs.Atime
	Dev, Suid          bool
	Debug              bool   // log every FUSE request
	Metrics            string // "host:port" to serve /metrics over TCP too ("": no)
	Version            string // Info.Version
	Logger             *slog.Logger
	// OwnerPID, when not 0, ties the server to that process: once it has
	// exited, the server syncs, unmounts and exits as after a signal (the
	// mount detached lazily if busy). It is watched through a pidfd opened
	// when Serve starts, so the owner must be alive then (a test harness
	// waiting for its mount); a pid that names no process is an error.
	// Test harnesses set it through mountproc.OwnerEnv.
	OwnerPID int
}

// Virtual names the workspace of a virtual mount.
type Virtual struct {
	Name string
	Base overlay.Base // zero: an existing workspace's, or the default branch's head
}

// forcedSyncTimeout bounds the sync before `agentfs umount --force`
// detaches: a store that does not answer must not keep a forced unmount
// from detaching at once.
const forcedSyncTimeout = 10 * time.Second

// shutdownSyncTimeout bounds the sync a signal asks for: a store that does
// not answer must not keep the server from unmounting (the cache keeps
// every change and the next mount uploads it).
const shutdownSyncTimeout = 2 * time.Minute

// Serve opens the volume, mounts it, serves the control socket and blocks
// until the mount is gone: unmounted by the control socket or from
// outside, or after a signal (ctx is cancelled by SIGINT/SIGTERM) or the
// exit of cfg.OwnerPID. ready is called once the mount is usable. The
// process's working directory becomes "/" (the server must never hold a
// directory of its own mount).
func Serve(ctx context.Context, cfg Config, ready func(control.Info)) error {
	if err := os.Chdir("/"); err != nil {
		return err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	if cfg.OwnerPID != 0 {
		var stop func()
		var err error
		if ctx, stop, err = watchOwner(ctx, cfg.OwnerPID); err != nil {
			return err
		}
		defer stop()
	}
	store, repo, err := mountproc.OpenRepo(ctx, cfg.URL, cfg.DefaultStore, cfg.Keys)
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	defer repo.Close()
	vol, branch, host, err := openVolume(ctx, cfg, repo, lg)
	if err != nil {
		return err
	}
	if host != nil {
		defer func() { _ = host.Close() }()
	}
	m := &backend{vol: vol, host: host, log: lg, cacheDir: cfg.CacheDir, gone: make(chan struct{}), closed: make(chan struct{})}
	volClosed := false
	defer func() {
		if !volClosed {
			_ = vol.Close(context.WithoutCancel(ctx))
		}
	}()
	vinfo, err := m.openWorkspace(ctx, cfg.Virtual)
	if err != nil {
		return err
	}
	l, err := control.Listen(cfg.CacheDir)
	if err != nil {
		return err
	}
	defer func() { _ = l.Close() }()
	info, err := m.mount(cfg, lg)
	if err != nil {
		return err
	}
	info.URL, info.Branch, info.Virtual = repo.URL(), branch, vinfo
	if !cfg.ReadOnly {
		m.autogc = &autoGC{repo: repo, log: lg, first: autoGCFirst, every: autoGCEvery}
		defer m.autogc.start(ctx)()
	}
	ctl := control.NewServer(info, m, store.Metrics(), lg)
	if cfg.Metrics != "" {
		stop, err := serveMetrics(cfg.Metrics, ctl.MetricsHandler(), lg)
		if err != nil {
			_ = m.srv.Unmount(true)
			return err
		}
		defer stop()
	}
	go func() {
		if err := ctl.Serve(l); err != nil {
			lg.Error("control socket stopped", "err", err)
		}
	}()
	ready(info)

	m.waitUnmounted(ctx, cfg.MountPoint)
	volClosed = true
	if err := m.closeVolume(ctx, ctl); err != nil {
		return fmt.Errorf("closing the volume: %w (nothing is lost: mounting again with cache dir %s uploads it)", err, cfg.CacheDir)
	}
	lg.Info("volume closed; everything is in the store", "url", repo.URL())
	return nil
}

// openVolume opens the engine on the branch cfg names, or on a virtual
// workspace's branch (made ready by overlay.Prepare, with its host
// directory as the lower layer), and returns the branch it serves and that
// host directory (nil if none): close it after closing the volume.
func openVolume(ctx context.Context, cfg Config, repo *snapshot.Repo, lg *slog.Logger) (vol *cache.Volume, branch string, lower *overlay.HostDir, err error) {
	host, _ := os.Hostname()
	opts := cache.Options{
		Repo: repo, CacheDir: cfg.CacheDir, Branch: cfg.Branch, ReadOnly: cfg.ReadOnly,
		CacheSize: cfg.CacheSize, CheckpointInterval: cfg.CheckpointInterval,
		Logger: lg, Host: host, MountPoint: cfg.MountPoint,
	}
	if v := cfg.Virtual; v != nil {
		branch, hd, err := overlay.Prepare(ctx, repo, v.Name, v.Base, host, time.Now())
		if err != nil {
			return nil, "", nil, fmt.Errorf("virtual workspace %s: %w", v.Name, err)
		}
		if hd != nil {
			opts.Lower, lower = hd, hd
		}
		opts.Branch = branch
	}
	WriteCacheInfo(cfg.CacheDir, cfg.URL, opts.Branch)
	vol, err = cache.Open(ctx, opts)
	if err != nil {
		if lower != nil {
			_ = lower.Close()
		}
		return nil, "", nil, err
	}
	return vol, opts.Branch, lower, nil
}

// openWorkspace opens the virtual workspace v over the volume (nil: a
// plain mount) and returns how Info describes it.
func (m *backend) openWorkspace(ctx context.Context, v *Virtual) (*control.VirtualInfo, error) {
	if v == nil {
		return nil, nil
	}
	ws, err := overlay.NewWorkspace(ctx, m.vol, m.host)
	if err != nil {
		return nil, err
	}
	m.ws = ws
	vinfo := &control.VirtualInfo{Name: v.Name, Base: v.Base.Ref}
	vb, err := ws.Base(ctx)
	if err != nil {
		return nil, err
	}
	vinfo.HostDir = vb.HostDir
	return vinfo, nil
}

// mount mounts the volume on cfg.MountPoint, has the kernel told of every
// namespace move, and checks that the mount shows in the mount table
// (control.Find finds mounts there). Info is the mount's, without the
// volume's URL, branch and workspace.
func (m *backend) mount(cfg Config, lg *slog.Logger) (control.Info, error) {
	srv, err := afs.Mount(cfg.MountPoint, m.vol, afs.Options{
		FsName:     control.SourcePrefix + cfg.CacheDir,
		AllowOther: allowOtherPermitted(),
		ReadOnly:   cfg.ReadOnly,
		Logger:     lg,
		Debug:      cfg.Debug,
		Tuning:     cfg.Tuning,
		Atime:      cfg.Atime,
		Dev:        cfg.Dev,
		Suid:       cfg.Suid,
	})
	if err != nil {
		return control.Info{}, fmt.Errorf("%w (is fuse3 installed and /dev/fuse usable? see scripts/setup-fuse.sh)", err)
	}
	m.srv = srv
	// Whenever the engine moves the namespace to another commit (a
	// read-only mount following its branch, a restore), the kernel is told
	// which entries and inodes changed.
	m.vol.SetNotifier(srv)
	go func() { srv.Wait(); close(m.gone) }()
	mi, err := afs.MountOf(cfg.MountPoint)
	if err != nil {
		_ = srv.Unmount(true)
		return control.Info{}, fmt.Errorf("the mount on %s does not show in the mount table: %w", cfg.MountPoint, err)
	}
	if mi.MountPoint != cfg.MountPoint {
		_ = srv.Unmount(true)
		return control.Info{}, fmt.Errorf("the mount on %s shows in the mount table as %s", cfg.MountPoint, mi.MountPoint)
	}
	return control.Info{
		MountPoint: cfg.MountPoint, Dev: mi.Dev, CacheDir: cfg.CacheDir,
		ReadOnly: cfg.ReadOnly, PID: os.Getpid(), Started: time.Now().UTC(), Version: cfg.Version,
	}, nil
}

// waitUnmounted returns once the mount is gone: unmounted (the control
// socket's Unmount, or from outside), or, after a signal or the owner's
// exit (ctx ends),
// synced and unmounted here; busy, it is detached lazily and served until
// its last user is gone.
func (m *backend) waitUnmounted(ctx context.Context, mnt string) {
	select {
	case <-m.gone:
		m.log.Info("unmounted", "mount_point", mnt)
		return
	case <-ctx.Done():
	}
	why := "signal received"
	if errors.Is(context.Cause(ctx), errOwnerExited) {
		why = "the owner process exited"
	}
	m.log.Info(why+": syncing and unmounting", "mount_point", mnt)
	go forceOnSecondSignal(mnt, m.log)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownSyncTimeout)
	if err := m.vol.Sync(sctx); err != nil {
		m.log.Warn("sync before unmount failed; the cache keeps the changes for the next mount", "err", err)
	}
	cancel()
	if err := m.srv.Unmount(false); errors.Is(err, afs.ErrBusy) {
		m.log.Warn("mount busy: detaching it lazily; serving its last users until they close their files", "mount_point", mnt)
		err = m.srv.Unmount(true)
		if err != nil && !errors.Is(err, afs.ErrNotMounted) {
			m.log.Error("unmount failed", "err", err)
		}
	} else if err != nil && !errors.Is(err, afs.ErrNotMounted) {
		m.log.Error("unmount failed", "err", err)
	}
	<-m.gone
}

// closeVolume closes the volume (its final commit), lets an Unmount
// waiting on the control socket answer with the outcome, and stops the
// control server.
func (m *backend) closeVolume(ctx context.Context, ctl *control.Server) error {
	m.closeErr = m.vol.Close(context.WithoutCancel(ctx))
	close(m.closed)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	_ = ctl.Shutdown(sctx)
	cancel()
	return m.closeErr
}

// backend is a served mount: the control server's Backend (with History,
// AutoGC and VirtualBackend).
type backend struct {
	vol  *cache.Volume
	host *overlay.HostDir // the lower layer of a virtual mount over a host directory, else nil
	srv  *afs.Server
	log  *slog.Logger
	ws   *overlay.Workspace // a virtual mount's workspace, else nil

	autogc   *autoGC // the background gc of a read-write mount, else nil
	cacheDir string  // the mount's cache directory, for messages

	gone     chan struct{} // closed when the FUSE server stopped (unmounted)
	closed   chan struct{} // closed when the volume is closed
	closeErr error         // set before closed is closed
}

var _ control.Backend = (*backend)(nil)

// Sync commits everything written before.
func (m *backend) Sync(ctx context.Context) error { return m.vol.Sync(ctx) }

// Status returns the engine's state.
func (m *backend) Status(ctx context.Context) (cache.Status, error) { return m.vol.Status(ctx) }

// Ops returns the FUSE request counters.
func (m *backend) Ops() []afs.OpStats { return m.srv.Ops() }

// Invalidate makes the kernel forget what inv names (the control
// socket's goroutines are no FUSE handlers, so this cannot deadlock).
func (m *backend) Invalidate(inv control.Invalidation) error {
	switch {
	case inv.All:
		return m.srv.InvalidateAll()
	case inv.Ino != 0:
		return m.srv.InvalidateInode(inv.Ino)
	}
	return m.srv.InvalidateEntry(inv.Parent, inv.Name)
}

// Unmount syncs, detaches and waits for the volume to close (not with
// force, which detaches lazily and returns). A forced unmount detaches even
// when the sync fails or takes longer than forcedSyncTimeout, and then
// returns that failure: the changes are only in the cache directory until
// the volume's final commit succeeds.
func (m *backend) Unmount(ctx context.Context, force bool) error {
	sctx := ctx
	if force {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, forcedSyncTimeout)
		defer cancel()
	}
	syncErr := m.vol.Sync(sctx)
	if errors.Is(syncErr, cache.ErrClosed) {
		syncErr = nil
	}
	if syncErr != nil {
		if !force {
			return fmt.Errorf("sync before unmount: %w", syncErr)
		}
		m.log.Warn("sync before a forced unmount failed; the cache keeps the changes", "err", syncErr)
	}
	if err := m.srv.Unmount(force); err != nil && !errors.Is(err, afs.ErrNotMounted) {
		return err
	}
	if force {
		if syncErr != nil {
			return fmt.Errorf("detached, but the sync before it failed: %w; the changes are only in the cache directory %s "+
				"(the server tries once more when its last user is gone; if that fails too, mounting again with that cache directory uploads them)",
				syncErr, m.cacheDir)
		}
		return nil
	}
	select {
	case <-m.closed:
		return m.closeErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forceOnSecondSignal exits the server at a second SIGINT/SIGTERM during
// shutdown, detaching the mount lazily: a shutdown stuck on an
// unreachable store or on busy users can always be cut short. Nothing
// fsynced is lost (the cache directory keeps it).
func forceOnSecondSignal(mnt string, lg *slog.Logger) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
	lg.Warn("second signal: detaching the mount and exiting now, without syncing: what was not synced stays in the cache directory, and mounting again with it uploads it", "mount_point", mnt)
	_ = afs.Unmount(mnt, true)
	os.Exit(1)
}

// allowOtherPermitted reports whether this process may mount with
// allow_other: as root, or with user_allow_other in /etc/fuse.conf.
func allowOtherPermitted() bool {
	if os.Geteuid() == 0 {
		return true
	}
	fh, err := os.Open("/etc/fuse.conf")
	if err != nil {
		return false
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "user_allow_other" {
			return true
		}
	}
	return false
}

// WriteCacheInfo notes in the cache directory dir what it belongs to, for
// people looking at ~/.cache/agentfs and for ReadCacheInfo.
func WriteCacheInfo(dir, url, branch string) {
	text := fmt.Sprintf("agentfs cache directory\nstore:  %s\nbranch: %s\n", blobstore.DisplayURL(url), branch)
	_ = os.WriteFile(filepath.Join(dir, "info.txt"), []byte(text), 0o600)
}

// ReadCacheInfo returns what WriteCacheInfo noted in the cache directory
// dir: the store (as blobstore.DisplayURL shows it) and the branch; "" for
// what it cannot tell.
func ReadCacheInfo(dir string) (store, branch string) {
	b, err := os.ReadFile(filepath.Join(dir, "info.txt"))
	if err != nil {
		return "", ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "store:"); ok {
			store = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "branch:"); ok {
			branch = strings.TrimSpace(v)
		}
	}
	return store, branch
}
