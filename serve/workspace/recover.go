package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/mountproc"
	"github.com/agentfs/agentfs/snapshot"
)

// adoptTimeout bounds the question to a mount server left by a killed
// daemon.
const adoptTimeout = 5 * time.Second

// dockerCleanupTimeout bounds the removal of the containers a killed
// daemon left.
const dockerCleanupTimeout = time.Minute

// recover loads the records and reconciles them with what runs: see Open.
func (m *Manager) recover(ctx context.Context) error {
	recs, skipped, err := m.loadRecords()
	if err != nil {
		return err
	}
	// First the commands left running: they would keep mounts busy and
	// go on writing to adopted ones.
	if n := m.killOrphans(); n > 0 {
		m.log.Warn("killed commands a previous daemon left running", "count", n)
	}
	m.removeContainers(ctx, recs)
	for name, why := range skipped {
		m.log.Warn("state dir: a workspace directory without a readable record is left alone", "dir", m.wsDir(name), "err", why)
		// Whatever it is, nothing may stay mounted on its mount point.
		if _, err := m.recoverMount(ctx, record{Name: name}); err != nil {
			m.log.Warn("clean up its mount", "dir", m.wsDir(name), "err", err)
		}
	}
	store := blobstore.DisplayURL(m.url)
	for _, r := range recs {
		if r.Store != store {
			return fmt.Errorf("state dir %s holds the workspaces of store %s, not %s: pass --store %s, or another --state-dir: %w",
				m.stateDir, r.Store, store, r.Store, ErrInvalidArgument)
		}
	}
	for _, r := range recs {
		if err := m.recoverOne(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// recoverOne reconciles the workspace of record r.
func (m *Manager) recoverOne(ctx context.Context, r record) error {
	mt, err := m.recoverMount(ctx, r)
	if err != nil {
		return fmt.Errorf("recover workspace %s: %w", r.Name, err)
	}
	switch r.State {
	case stateCreating:
		// Cut short while creating: the branch was free before, so one
		// that exists now is this workspace's.
		if _, err := m.repo.HeadSeq(ctx, r.Branch); err == nil {
			r.State = stateReady
			if err := m.saveRecord(r); err != nil {
				return err
			}
			break
		} else if !errors.Is(err, snapshot.ErrNoCommits) {
			return fmt.Errorf("recover workspace %s: %w", r.Name, err)
		}
		if mt != nil {
			if err := m.unmount(ctx, r.Name, mt); err != nil {
				return err
			}
		}
		m.log.Info("removing a workspace whose creation was cut short", "workspace", r.Name)
		return os.RemoveAll(m.wsDir(r.Name))
	case stateDeleting:
		m.log.Info("finishing the removal of a workspace", "workspace", r.Name)
		if mt != nil {
			if err := m.unmount(ctx, r.Name, mt); err != nil {
				return err
			}
		}
		return m.removeWorkspace(ctx, r)
	}
	ws := &wsState{rec: r, mnt: mt, lastUsed: r.LastUsed}
	if mt != nil {
		ws.lastUsed = m.now()
	}
	m.ws[r.Name] = ws
	return nil
}

// recoverMount adopts the mount server of the workspace of r if it still
// answers on its control socket for its mount point (starting the
// workspace's exec backend on it); otherwise it cleans up a stale mount
// there. It returns the adopted mount, or nil.
func (m *Manager) recoverMount(ctx context.Context, r record) (*mounted, error) {
	name := r.Name
	mnt := m.mountPoint(name)
	actx, cancel := context.WithTimeout(ctx, adoptTimeout)
	defer cancel()
	info, err := control.Dial(filepath.Join(m.cacheDir(name), control.SocketName)).Info(actx)
	if err == nil && info.MountPoint == mnt {
		mt, err := m.attach(actx, mnt, info.PID, r)
		if err == nil {
			m.log.Info("adopted the mount server of a previous daemon", "workspace", name, "pid", info.PID)
			return mt, nil
		}
		m.log.Warn("a mount server answers but its mount is not usable; stopping it", "workspace", name, "pid", info.PID, "err", err)
		if err := control.Dial(filepath.Join(m.cacheDir(name), control.SocketName)).Unmount(actx, true); err != nil {
			m.log.Warn("unmount", "workspace", name, "err", err)
		}
		waitPid(info.PID)
	}
	stale, err := mountproc.CleanStale(ctx, mnt)
	if err != nil {
		return nil, err
	}
	if stale {
		m.log.Info("cleaned up a stale mount (its server had died; its cache keeps every change for the next mount)", "workspace", name)
	}
	return nil, nil
}

// waitPid waits for process pid to end, for at most exitTimeout.
func waitPid(pid int) {
	deadline := time.Now().Add(exitTimeout)
	for pidAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// removeContainers removes the containers of docker backends that a
// previous daemon of this state directory left (with the commands in
// them): the lock makes this daemon the only one of the state directory,
// so every container labelled with it is a predecessor's. An engine that
// does not answer is logged: at warning level when some workspace uses
// docker.
func (m *Manager) removeContainers(ctx context.Context, recs []record) {
	// An engine that does not answer (a DOCKER_HOST out of reach) must not
	// hold up a daemon that may not even use it.
	ctx, cancel := context.WithTimeout(ctx, dockerCleanupTimeout)
	defer cancel()
	n, err := exec.RemoveContainers(ctx, map[string]string{LabelStateDir: m.stateDir})
	if n > 0 {
		m.log.Warn("removed the containers a previous daemon left", "count", n)
	}
	if err == nil {
		return
	}
	docker := m.cfg.Backend.Docker()
	for _, r := range recs {
		docker = docker || m.spec(r).Docker()
	}
	if errors.Is(err, exec.ErrDockerUnavailable) && !docker {
		m.log.Debug("no docker engine to look for containers left by a previous daemon", "err", err)
		return
	}
	m.log.Warn("could not remove the containers a previous daemon left", "err", err)
}
