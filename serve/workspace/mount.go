package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/mountexec"
	"github.com/agentfs/agentfs/internal/mountproc"
)

// Bounds of the mount servers' transitions.
const (
	mountTimeout   = 2 * time.Minute  // start a server until its mount is ready
	unmountTimeout = 10 * time.Minute // sync and unmount (uploads what waits)
	exitTimeout    = 30 * time.Second // a server's exit after its unmount
)

// checkpointInterval is the workspaces' mounts' --checkpoint-interval.
const checkpointInterval = 5 * time.Second

// mounted is a workspace's running mount.
type mounted struct {
	pid     int
	proc    *mountproc.Process // nil for a server adopted from a killed daemon
	ctl     *control.Client
	backend *exec.Backend
	// extra are the backends of Handle.NewBackend still open, and ending
	// is set once an unmount has closed them (no more may be added); both
	// guarded by Manager.mu.
	extra  map[*exec.Backend]struct{}
	ending bool
}

// alive reports whether the mount's server process still runs.
func (mt *mounted) alive() bool {
	if mt.proc != nil {
		select {
		case <-mt.proc.Exited():
			return false
		default:
			return true
		}
	}
	return pidAlive(mt.pid)
}

// pidAlive reports whether process pid runs (a zombie does not: an
// adopted server's new parent may not reap it at once).
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// Handle pins a mounted workspace: while it is held, the workspace is not
// unmounted for idleness nor evicted by MaxMounted, and Delete fails with
// ErrBusy (but not for a Handle of Watch). Only the end of its lifetime
// and Close unmount it anyway (killing the commands running through
// Backend). Every Handle must be released.
type Handle struct {
	// Name is the workspace's name.
	Name string
	// MountPoint is where the workspace is mounted (absolute, symlinks
	// resolved).
	MountPoint string
	// Control is the mount's control client (sync, status, history,
	// virtual diff/commit/discard).
	Control *control.Client
	// Backend is the workspace's exec.Backend (local, or docker with one
	// container per mount: see Spec) rooted at MountPoint with the
	// mount's sync barrier and change tracker. It is shared by every
	// Handle of this mount; do not Close it (the manager does, at
	// unmount, which kills the commands still running in it and removes
	// its container).
	Backend *exec.Backend
	// Virtual reports a virtual (copy-on-write) workspace.
	Virtual bool

	m     *Manager
	ws    *wsState
	mt    *mounted // the mount the Handle pins
	watch bool     // a Handle of Watch: counted in ws.watchers
	once  sync.Once
}

// NewBackend starts an exec backend of spec (its empty docker options
// completed with the daemon's, as a workspace's are) on the workspace's
// mount, with the mount's seams: for a command that must not run with the
// workspace's own backend. The caller closes it once its commands have
// ended (Close kills what still runs and removes its container); an
// unmount closes it too. Choosing a backend bypasses the admin's choice
// for the workspace: only the admin may ask for it.
func (h *Handle) NewBackend(ctx context.Context, spec exec.Spec) (*exec.Backend, error) {
	if !h.mountedLocking() {
		return nil, fmt.Errorf("workspace %s: unmounted (its lifetime ended, or the daemon closes): %w", h.Name, ErrClosed)
	}
	b, err := h.m.newBackend(ctx, h.Control, record{Name: h.Name, Backend: &spec})
	if err != nil {
		return nil, err
	}
	h.m.mu.Lock()
	if h.ws.mnt != h.mt || h.mt.ending {
		h.m.mu.Unlock()
		_ = b.Close()
		return nil, fmt.Errorf("workspace %s: unmounted while a backend was starting: %w", h.Name, ErrClosed)
	}
	if h.mt.extra == nil {
		h.mt.extra = map[*exec.Backend]struct{}{}
	}
	h.mt.extra[b] = struct{}{}
	h.m.mu.Unlock()
	return b, nil
}

// mountedLocking reports whether the mount h pins is still the
// workspace's and not being unmounted.
func (h *Handle) mountedLocking() bool {
	h.m.mu.Lock()
	defer h.m.mu.Unlock()
	return h.ws.mnt == h.mt && !h.mt.ending
}

// CloseBackend closes a backend of NewBackend and forgets it.
func (h *Handle) CloseBackend(b *exec.Backend) error {
	h.m.mu.Lock()
	delete(h.mt.extra, b)
	h.m.mu.Unlock()
	return b.Close()
}

// Release unpins the workspace and counts as its last use. Later calls
// do nothing.
func (h *Handle) Release() {
	h.once.Do(func() {
		h.m.mu.Lock()
		if h.watch {
			h.ws.watchers--
		} else {
			h.ws.pins--
		}
		h.ws.lastUsed = h.m.now()
		h.m.mu.Unlock()
	})
}

// Acquire returns a Handle of workspace name, mounting it first when it
// is not mounted (a mount server is started and Acquire returns once its
// mount is ready). It fails with ErrNotFound, ErrExpired, ErrBusy (the
// MaxMounted cap is reached and every mounted workspace is held: it does
// not wait for one to be released), ErrClosed, or why the mount failed.
func (m *Manager) Acquire(ctx context.Context, name string) (*Handle, error) {
	return m.acquire(ctx, name, false)
}

// acquire is Acquire; watch makes the Handle one of Watch.
func (m *Manager) acquire(ctx context.Context, name string, watch bool) (*Handle, error) {
	m.mu.Lock()
	for {
		if m.closed {
			m.mu.Unlock()
			return nil, ErrClosed
		}
		ws := m.ws[name]
		if ws == nil || ws.rec.State == stateDeleting {
			m.mu.Unlock()
			return nil, fmt.Errorf("workspace %s: %w", name, ErrNotFound)
		}
		if ws.rec.Expired {
			m.mu.Unlock()
			return nil, fmt.Errorf("workspace %s: %w", name, ErrExpired)
		}
		if ws.op != nil {
			if !m.waitOpLocked(ctx, ws) {
				m.mu.Unlock()
				return nil, ctx.Err()
			}
			continue
		}
		if ws.mnt != nil && ws.mnt.alive() {
			if watch {
				ws.watchers++
			} else {
				ws.pins++
			}
			ws.lastUsed = m.now()
			h := &Handle{Name: name, MountPoint: m.mountPoint(name), Control: ws.mnt.ctl, Backend: ws.mnt.backend, Virtual: ws.rec.Virtual, m: m, ws: ws, mt: ws.mnt, watch: watch}
			m.mu.Unlock()
			return h, nil
		}
		// Mount it: first make room under MaxMounted.
		if again, err := m.makeRoomLocked(ctx); err != nil {
			m.mu.Unlock()
			return nil, fmt.Errorf("workspace %s: %w", name, err)
		} else if again {
			continue
		}
		old := ws.mnt // a server that died by itself: clean up after it
		ws.op, ws.mounting = make(chan struct{}), true
		rec := ws.rec
		m.mu.Unlock()
		if old != nil {
			m.log.Warn("mount server died; mounting again", "workspace", name, "pid", old.pid)
			_ = old.backend.Close()
		}
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mountTimeout)
		mt, err := m.mount(mctx, rec)
		cancel()
		m.mu.Lock()
		ws.mnt = mt
		m.endOpLocked(ws)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
	}
}

// makeRoomLocked makes sure one more workspace may be mounted under
// MaxMounted: it unmounts the least recently used mounted workspace that
// is not held (releasing mu meanwhile; again is then true: look again),
// waits for a transition when only that can free a slot, or fails with
// ErrBusy.
func (m *Manager) makeRoomLocked(ctx context.Context) (again bool, err error) {
	if m.cfg.MaxMounted == 0 {
		return false, nil
	}
	n := 0
	var victim, pending *wsState
	for _, w := range m.ws {
		if w.mnt == nil && !w.mounting {
			continue
		}
		n++
		switch {
		case w.op != nil:
			pending = w
		case !w.inUse() && (victim == nil || w.lastUsed.Before(victim.lastUsed)):
			victim = w
		}
	}
	if n < m.cfg.MaxMounted {
		return false, nil
	}
	if victim != nil {
		m.log.Info("unmounting the least recently used workspace to make room", "workspace", victim.rec.Name, "max_mounted", m.cfg.MaxMounted)
		m.unmountLocked(ctx, victim)
		return true, nil
	}
	if pending != nil {
		if !m.waitOpLocked(ctx, pending) {
			return false, ctx.Err()
		}
		return true, nil
	}
	return false, fmt.Errorf("%d workspaces are mounted (--max-mounted) and all in use: %w", n, ErrBusy)
}

// unmountLocked syncs and unmounts ws, which is mounted and has no
// transition, releasing mu meanwhile. A failed unmount leaves it mounted
// (with a fresh backend) and is logged.
func (m *Manager) unmountLocked(ctx context.Context, ws *wsState) {
	mt := ws.mnt
	ws.op = make(chan struct{})
	m.mu.Unlock()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unmountTimeout)
	err := m.unmount(uctx, ws.rec.Name, mt)
	cancel()
	var fresh *exec.Backend
	if err != nil {
		m.log.Error("unmount failed; the workspace stays mounted", "workspace", ws.rec.Name, "err", err)
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mountTimeout)
		fresh, _ = m.newBackend(bctx, mt.ctl, ws.rec) // unmount closed the old one
		cancel()
	}
	m.mu.Lock()
	if fresh != nil {
		mt.backend, mt.ending = fresh, false
	}
	if err == nil {
		ws.mnt = nil
		ws.rec.LastUsed = ws.lastUsed
		if err := m.saveRecord(ws.rec); err != nil {
			m.log.Warn("could not save the record", "workspace", ws.rec.Name, "err", err)
		}
	}
	m.endOpLocked(ws)
}

// mountPoint is the mount point of workspace name.
func (m *Manager) mountPoint(name string) string { return filepath.Join(m.wsDir(name), "mnt") }

// cacheDir is the cache directory of workspace name's mount.
func (m *Manager) cacheDir(name string) string { return filepath.Join(m.wsDir(name), "cache") }

// mount starts the mount server of the workspace of rec and waits until
// its mount answers.
func (m *Manager) mount(ctx context.Context, rec record) (*mounted, error) {
	flags := []string{"--checkpoint-interval=" + checkpointInterval.String()}
	if rec.Virtual {
		// The branch exists (Create prepared it): the server takes its
		// base from it.
		flags = append(flags, "--virtual", "--name="+rec.Name)
	} else {
		flags = append(flags, "--branch="+rec.Branch)
	}
	mnt := m.mountPoint(rec.Name)
	start := time.Now()
	p, err := mountproc.Start(ctx, mountproc.Spec{
		Exe: m.cfg.Executable, URL: m.url, MountPoint: mnt, CacheDir: m.cacheDir(rec.Name), Flags: flags, Secrets: m.keySecret,
	})
	if err != nil {
		return nil, fmt.Errorf("mount workspace %s: %w", rec.Name, err)
	}
	mt, err := m.attach(ctx, mnt, p.PID, rec)
	if err != nil {
		_ = syscall.Kill(p.PID, syscall.SIGTERM)
		<-p.Exited()
		return nil, fmt.Errorf("mount workspace %s: %w", rec.Name, err)
	}
	mt.proc = p
	m.log.Info("mounted", "workspace", rec.Name, "pid", p.PID, "duration", time.Since(start))
	return mt, nil
}

// attach connects to the mount on mnt, served by process pid, and starts
// the exec backend of the workspace of rec on it.
func (m *Manager) attach(ctx context.Context, mnt string, pid int, rec record) (*mounted, error) {
	ctl, err := control.Find(ctx, mnt)
	if err != nil {
		return nil, err
	}
	b, err := m.newBackend(ctx, ctl, rec)
	if err != nil {
		return nil, err
	}
	return &mounted{pid: pid, ctl: ctl, backend: b}, nil
}

// newBackend starts the exec backend of the workspace of rec (its Spec)
// on the mount ctl serves, with the mount's seams. A docker backend's
// container carries the labels that let the next daemon remove it after a
// kill -9 (see recover).
func (m *Manager) newBackend(ctx context.Context, ctl *control.Client, rec record) (*exec.Backend, error) {
	opts := m.cfg.Exec
	opts.Syncer = mountexec.Syncer{Client: ctl}
	opts.ChangeTracker = &mountexec.CheckpointTracker{Client: ctl}
	spec := m.spec(rec)
	labels := map[string]string{LabelStateDir: m.stateDir, LabelWorkspace: rec.Name}
	b, err := spec.New(ctx, ctl.MountPoint(), opts, labels)
	if errors.Is(err, exec.ErrRootUser) {
		err = fmt.Errorf("%w (give the workspace's backend a user, or the daemon --user)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %s backend on %s: %w", rec.Name, spec.Type, ctl.MountPoint(), err)
	}
	return b, nil
}

// unmount closes the mount's backend (killing its commands), syncs and
// unmounts (lazily when the mount is still busy: then its last users keep
// it until they close their files) and waits for the server to exit.
func (m *Manager) unmount(ctx context.Context, name string, mt *mounted) error {
	m.mu.Lock()
	extra := mt.extra
	mt.extra, mt.ending = nil, true
	m.mu.Unlock()
	for b := range extra {
		if err := b.Close(); err != nil {
			m.log.Warn("closing a request's exec backend", "workspace", name, "err", err)
		}
	}
	if err := mt.backend.Close(); err != nil {
		m.log.Warn("closing the exec backend", "workspace", name, "err", err)
	}
	err := mt.ctl.Unmount(ctx, false)
	if errors.Is(err, control.ErrBusy) {
		m.log.Warn("mount busy: detaching it lazily", "workspace", name)
		err = mt.ctl.Unmount(ctx, true)
	}
	if err != nil && mt.alive() {
		return fmt.Errorf("unmount workspace %s: %w", name, err)
	}
	if !m.waitExit(mt) {
		m.log.Warn("mount server still running after its unmount; killing it", "workspace", name, "pid", mt.pid)
		_ = syscall.Kill(mt.pid, syscall.SIGKILL)
	}
	if _, err := mountproc.CleanStale(ctx, m.mountPoint(name)); err != nil {
		m.log.Warn("clean up after the unmount", "workspace", name, "err", err)
	}
	m.log.Info("unmounted", "workspace", name)
	return nil
}

// waitExit waits for the mount's server to exit, for at most exitTimeout.
func (m *Manager) waitExit(mt *mounted) bool {
	if mt.proc != nil {
		select {
		case <-mt.proc.Exited():
			return true
		case <-time.After(exitTimeout):
			return false
		}
	}
	waitPid(mt.pid)
	return !pidAlive(mt.pid)
}
