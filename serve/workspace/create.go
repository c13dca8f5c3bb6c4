package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

// virtualPrefix starts the branch of every virtual workspace
// (overlay.BranchName), so no workspace name may start with it.
var virtualPrefix = overlay.BranchName("")

// snapshotPrefix starts a CreateRequest.From that names a snapshot.
const snapshotPrefix = "snapshot:"

// validate checks req and returns the branch of the workspace.
func (m *Manager) validate(req CreateRequest) (string, error) {
	name := req.Name
	if err := snapshot.ValidateName("workspace", name); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidName, err)
	}
	if strings.HasPrefix(name, virtualPrefix) {
		return "", fmt.Errorf("workspace name %q: names starting with %q are reserved for virtual workspaces' branches: %w", name, virtualPrefix, ErrInvalidName)
	}
	branch := name
	switch {
	case req.Virtual:
		branch = overlay.BranchName(name)
		if err := snapshot.ValidateName("workspace", branch); err != nil {
			return "", fmt.Errorf("%w: %w", ErrInvalidName, err)
		}
		if req.From != "" {
			return "", fmt.Errorf("workspace %s: a virtual workspace is over its base; from is for the others: %w", name, ErrInvalidArgument)
		}
		if req.Base == "" {
			return "", fmt.Errorf("workspace %s: a virtual workspace needs a base (snapshot:NAME or an absolute host directory): %w", name, ErrInvalidArgument)
		}
		if strings.ContainsRune(req.Base, '/') && !filepath.IsAbs(req.Base) {
			return "", fmt.Errorf("workspace %s: base %q: a host directory must be absolute: %w", name, req.Base, ErrInvalidArgument)
		}
		if filepath.IsAbs(req.Base) && (within(req.Base, m.stateDir) || within(m.stateDir, req.Base)) {
			return "", fmt.Errorf("workspace %s: base %s and the state directory %s: neither may lie inside the other (the workspace would read its own mount and cache): %w", name, req.Base, m.stateDir, ErrInvalidArgument)
		}
	case req.Base != "":
		return "", fmt.Errorf("workspace %s: base is for virtual workspaces (add virtual): %w", name, ErrInvalidArgument)
	}
	if req.Lifetime < 0 {
		return "", fmt.Errorf("workspace %s: negative lifetime %v: %w", name, req.Lifetime, ErrInvalidArgument)
	}
	if err := m.spec(record{Backend: req.Backend}).Validate(); err != nil {
		return "", fmt.Errorf("workspace %s: %w: %w", name, ErrInvalidArgument, err)
	}
	if req.DeleteOnExpiry && req.Lifetime == 0 {
		return "", fmt.Errorf("workspace %s: delete on expiry needs a lifetime: %w", name, ErrInvalidArgument)
	}
	return branch, nil
}

// Create creates workspace req.Name: a new branch of the volume (empty,
// forked from a snapshot or another workspace's head, or a virtual
// workspace over a base) and its record. The workspace is not mounted
// until its first Acquire. It fails with ErrInvalidName,
// ErrInvalidArgument, ErrExists (a workspace or branch of that name),
// ErrNotFound (From names no workspace), ErrClosed, or the store's error
// (snapshot.ErrNoRef when From or Base names no snapshot).
func (m *Manager) Create(ctx context.Context, req CreateRequest) (Info, error) {
	branch, err := m.validate(req)
	if err != nil {
		return Info{}, err
	}
	now := m.now().UTC()
	rec := record{
		Name: req.Name, Branch: branch, Store: blobstore.DisplayURL(m.url), State: stateCreating, Created: now, LastUsed: now,
		DeleteOnExpiry: req.DeleteOnExpiry, Virtual: req.Virtual, Base: req.Base, From: req.From, Metadata: req.Metadata,
		Backend: req.Backend,
	}
	if req.Lifetime > 0 {
		t := now.Add(req.Lifetime)
		rec.ExpiresAt = &t
	}
	if _, err := m.repo.HeadSeq(ctx, branch); err == nil {
		return Info{}, fmt.Errorf("workspace %s: the volume has a branch %s already: %w", req.Name, branch, ErrExists)
	} else if !errors.Is(err, snapshot.ErrNoCommits) {
		return Info{}, fmt.Errorf("workspace %s: %w", req.Name, err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Info{}, ErrClosed
	}
	if m.ws[req.Name] != nil {
		m.mu.Unlock()
		return Info{}, fmt.Errorf("workspace %s: %w", req.Name, ErrExists)
	}
	ws := &wsState{rec: rec, op: make(chan struct{}), lastUsed: now}
	m.ws[req.Name] = ws
	m.mu.Unlock()

	err = m.saveRecord(rec)
	if err == nil {
		err = m.createBranch(ctx, req, branch)
	}
	if err == nil {
		rec.State = stateReady
		err = m.saveRecord(rec)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		delete(m.ws, req.Name)
		_ = os.RemoveAll(m.wsDir(req.Name))
		m.endOpLocked(ws)
		return Info{}, err
	}
	ws.rec = rec
	m.endOpLocked(ws)
	in := m.info(ws)
	in.HeadCommit = snapshot.CommitID{Branch: branch, Seq: 1}.String()
	return in, nil
}

// createBranch makes the branch of a new workspace.
func (m *Manager) createBranch(ctx context.Context, req CreateRequest, branch string) error {
	host, _ := os.Hostname()
	var err error
	switch {
	case req.Virtual:
		base := overlay.Base{Ref: req.Base}
		if filepath.IsAbs(req.Base) {
			base = overlay.Base{HostDir: req.Base}
		}
		var hd *overlay.HostDir
		if _, hd, err = overlay.Prepare(ctx, m.repo, req.Name, base, host, m.now()); hd != nil {
			_ = hd.Close()
		}
	case req.From == "":
		// The root belongs to the user that runs the commands, so that
		// they can write in it: the daemon's, or the container's.
		uid, gid := os.Getuid(), os.Getgid()
		if s := m.spec(record{Backend: req.Backend}); s.Docker() {
			if u, g, ok := s.UID(); ok {
				uid, gid = u, g
			}
		}
		_, err = m.repo.CreateBranchEmpty(ctx, branch, 0o755, uint32(uid), uint32(gid), m.now(), host, "agentfs serve: workspace "+req.Name)
		if errors.Is(err, snapshot.ErrCommitExists) {
			err = fmt.Errorf("%w: %w", ErrExists, err)
		}
	case strings.HasPrefix(req.From, snapshotPrefix):
		_, err = m.repo.Fork(ctx, req.From, branch, snapshot.ForkOptions{
			Message: "agentfs serve: workspace " + req.Name + " from " + req.From, Host: host, Now: m.now})
	default:
		err = m.forkWorkspace(ctx, req, branch, host)
	}
	if errors.Is(err, snapshot.ErrBranchExists) {
		err = fmt.Errorf("%w: %w", ErrExists, err)
	}
	if err != nil {
		return fmt.Errorf("create workspace %s: %w", req.Name, err)
	}
	return nil
}

// forkWorkspace makes branch a fork of the head of workspace req.From,
// syncing it first when it is mounted.
func (m *Manager) forkWorkspace(ctx context.Context, req CreateRequest, branch, host string) error {
	m.mu.Lock()
	src := m.ws[req.From]
	if src == nil || src.rec.State != stateReady {
		m.mu.Unlock()
		return fmt.Errorf("from %s: %w", req.From, ErrNotFound)
	}
	if src.rec.Virtual {
		m.mu.Unlock()
		return fmt.Errorf("from %s: a virtual workspace holds changes over its base, not a tree of its own: commit them to its base and fork that, or fork its base: %w", req.From, ErrInvalidArgument)
	}
	if !m.waitOpLocked(ctx, src) {
		m.mu.Unlock()
		return ctx.Err()
	}
	srcBranch := src.rec.Branch
	var h *Handle
	if src.mnt != nil {
		// Pin it so that it stays mounted while it syncs.
		src.pins++
		h = &Handle{m: m, ws: src}
	}
	m.mu.Unlock()
	if h != nil {
		err := src.mnt.ctl.Sync(ctx)
		h.Release()
		if err != nil {
			return fmt.Errorf("sync workspace %s before forking it: %w", req.From, err)
		}
	}
	_, err := m.repo.Fork(ctx, "branch:"+srcBranch, branch, snapshot.ForkOptions{
		Message: "agentfs serve: workspace " + req.Name + " forked from workspace " + req.From, Host: host, Now: m.now})
	return err
}

// Delete removes workspace name: it is synced and unmounted if mounted,
// its branch is removed from the volume (its data is freed by the next
// gc), then its record, mount point and cache directory. Snapshots are
// names of the whole volume, not of a branch: those taken of the
// workspace stay (as do their data), and a new workspace can be created
// from them. It fails with ErrNotFound, ErrBusy while a Handle is held,
// or ErrClosed.
func (m *Manager) Delete(ctx context.Context, name string) error {
	return m.delete(ctx, name, false)
}

// delete is Delete; with force, Handles held do not stop it (a lifetime
// ended: their commands are killed).
func (m *Manager) delete(ctx context.Context, name string, force bool) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	ws := m.ws[name]
	if ws == nil || ws.rec.State != stateReady {
		m.mu.Unlock()
		return fmt.Errorf("workspace %s: %w", name, ErrNotFound)
	}
	if !m.waitOpLocked(ctx, ws) {
		m.mu.Unlock()
		return ctx.Err()
	}
	if m.ws[name] != ws || ws.rec.State != stateReady {
		m.mu.Unlock()
		return fmt.Errorf("workspace %s: %w", name, ErrNotFound)
	}
	if ws.pins > 0 && !force {
		m.mu.Unlock()
		return fmt.Errorf("workspace %s: %d requests or jobs use it: %w", name, ws.pins, ErrBusy)
	}
	ws.op = make(chan struct{})
	ws.rec.State = stateDeleting
	rec, mt := ws.rec, ws.mnt
	m.mu.Unlock()

	err := m.saveRecord(rec)
	if err == nil && mt != nil {
		err = m.unmount(ctx, name, mt)
	}
	if err == nil {
		err = m.removeWorkspace(ctx, rec)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		// Still there: usable again; a later Delete tries again.
		ws.rec.State = stateReady
		if serr := m.saveRecord(ws.rec); serr != nil {
			m.log.Warn("could not save the record", "workspace", name, "err", serr)
		}
		switch {
		case mt == nil:
		case !mt.alive():
			ws.mnt = nil
		default:
			if b, berr := m.newBackend(ctx, mt.ctl, ws.rec); berr == nil {
				mt.backend, mt.ending = b, false // unmount closed the old one
			}
		}
		m.endOpLocked(ws)
		return err
	}
	delete(m.ws, name)
	m.endOpLocked(ws)
	return nil
}

// removeWorkspace removes an unmounted workspace's branch and directory.
func (m *Manager) removeWorkspace(ctx context.Context, rec record) error {
	_, err := m.repo.DeleteBranch(ctx, rec.Branch, snapshot.DeleteBranchOptions{Now: m.now})
	if err != nil && !errors.Is(err, snapshot.ErrNoCommits) {
		return fmt.Errorf("delete workspace %s: %w", rec.Name, err)
	}
	if err := os.RemoveAll(m.wsDir(rec.Name)); err != nil {
		return fmt.Errorf("delete workspace %s: %w", rec.Name, err)
	}
	return nil
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
