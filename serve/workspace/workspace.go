// Package workspace is the workspace manager of `agentfs serve`: it owns
// the workspaces of one daemon, their records, their mount server
// processes and their lifecycle.
//
// A workspace is a branch of the one volume in the daemon's store (a
// virtual workspace W is the overlay branch virtual-W over a snapshot or a
// host directory), so creating, forking and snapshotting cost a few small
// requests whatever the data's size. Its record (creation time, last use,
// lifetime, metadata, what it was made from) is a small JSON file under
// the state directory, next to its mount point and cache directory:
//
//	STATE_DIR/lock                           held (flock) by the daemon
//	STATE_DIR/workspaces/NAME/workspace.json the record
//	STATE_DIR/workspaces/NAME/mnt            the mount point
//	STATE_DIR/workspaces/NAME/cache          the mount's cache dir (mount.log, control.sock)
//
// The daemon never serves a mount: a workspace is mounted on first use
// (Acquire) by an `agentfs mount` server in a process of its own, started
// as `agentfs mount -d` starts one (internal/mountproc), and the manager
// talks to it through its control socket (fs/control). After IdleTimeout
// without a Handle held, the workspace is synced and unmounted; the next
// Acquire mounts it again. A workspace whose lifetime ended is reported
// to Config.OnExpire, its commands are killed, it is synced and unmounted,
// and deleted if its creator asked for that.
//
// After a kill -9 of the daemon, Open adopts the mount servers that still
// answer their control sockets and cleans up mounts whose server is gone
// (their cache directories keep every change; the next mount uploads
// them), kills the commands it left running in workspaces and removes the
// containers of docker workspaces it left (labelled with the state
// directory), so nothing synced is lost and no stale mount, orphan process
// or container stays.
//
// Each mounted workspace has one exec backend (Handle.Backend), chosen by
// its record's Spec or else Config.Backend: local (commands run on the host
// as the daemon's user) or docker (one container per mount, started at
// mount with the mount point bind-mounted at /workspace and removed at
// unmount, so idle unmounts, lifetimes, deletion and Close stop it).
package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/mountproc"
	"github.com/agentfs/agentfs/internal/volkey"
	"github.com/agentfs/agentfs/snapshot"
)

// Errors of the manager; check them with errors.Is.
var (
	// ErrNotFound: no workspace has that name (or its creation or
	// removal is in progress).
	ErrNotFound = errors.New("no such workspace")
	// ErrExists: a workspace, or a branch of the volume, has that name.
	ErrExists = errors.New("workspace already exists")
	// ErrInvalidName: the name is not a valid workspace name (1 to 100
	// characters from [A-Za-z0-9._-], not starting with '.' or '-', and
	// not starting with "virtual-", which names virtual workspaces'
	// branches).
	ErrInvalidName = errors.New("invalid workspace name")
	// ErrInvalidArgument: a CreateRequest field is invalid (the error
	// says which).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrBusy: the workspace is in use (Delete while a Handle is held),
	// or Acquire needs a mount slot and MaxMounted workspaces are all
	// held. Retry later.
	ErrBusy = errors.New("workspace busy")
	// ErrExpired: the workspace's lifetime ended; it can no longer be
	// used, only read through a fork (Create with From) or deleted.
	ErrExpired = errors.New("workspace lifetime ended")
	// ErrClosed: the manager is closed.
	ErrClosed = errors.New("workspace manager closed")
)

// Labels of the containers of docker workspaces (besides exec's): a
// daemon removes the containers labelled with its state directory when it
// opens it (see Open).
const (
	LabelStateDir  = "agentfs.serve.state-dir" // the daemon's state directory (absolute)
	LabelWorkspace = "agentfs.serve.workspace" // the workspace's name
)

// DefaultIdleTimeout is Config.IdleTimeout's default.
const DefaultIdleTimeout = 10 * time.Minute

// Config configures a Manager.
type Config struct {
	// StoreURL is the store whose volume holds the workspaces; "" means
	// the embedded default store (the one `agentfs mount` uses without a
	// URL), initialized on first use.
	StoreURL string
	// StateDir holds the records, mount points and cache directories;
	// "" means DefaultStateDir().
	StateDir string
	// IdleTimeout is how long a mounted workspace stays mounted with no
	// Handle held; 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxMounted caps the mounted workspaces; 0 means no cap. When an
	// Acquire needs a mount and the cap is reached, the least recently
	// used workspace that holds no Handle is synced and unmounted; if
	// every mounted workspace is held, Acquire fails with ErrBusy.
	MaxMounted int
	// Logger receives the manager's log; nil discards it.
	Logger *slog.Logger
	// Now is the clock of idle timeouts, lifetimes and records; nil
	// means time.Now. Tests inject theirs.
	Now func() time.Time
	// OnExpire is called (from the manager's lifecycle goroutine, before
	// the workspace is unmounted) with the name of each workspace whose
	// lifetime ended, so that the caller stops its jobs. nil: none.
	OnExpire func(name string)
	// Executable is the agentfs binary that serves mounts; "" means this
	// process's own executable (right for `agentfs serve`).
	Executable string
	// Keys supplies the key of an encrypted volume (nil: none, and an
	// encrypted volume does not open). The key it gives is also handed to
	// each workspace's mount server, through its secrets pipe
	// (mountproc.Spec.Secrets), never in its environment.
	Keys snapshot.KeySource
	// Exec are the options of each mounted workspace's backend
	// (Handle.Backend); its Syncer and ChangeTracker are the mount's
	// (internal/mountexec), whatever is set here.
	Exec exec.Options
	// Backend is the exec backend of the workspaces created without one
	// (the zero value: local). Its docker options (image, user, network,
	// limits) are also the defaults of the docker workspaces' options
	// left empty, even when its Type is local.
	Backend exec.Spec
	// ScanInterval is how often idle timeouts and lifetimes are checked;
	// 0 means IdleTimeout/10, between 1 s and 30 s.
	ScanInterval time.Duration
}

// DefaultStateDir is the default Config.StateDir:
// $XDG_STATE_HOME/agentfs/serve, or ~/.local/state/agentfs/serve.
func DefaultStateDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the state directory: %w (set XDG_STATE_HOME or HOME, or pass --state-dir)", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "agentfs", "serve"), nil
}

// Status is whether a workspace is mounted.
type Status string

// Workspace statuses.
const (
	StatusMounted   Status = "mounted"
	StatusUnmounted Status = "unmounted"
)

// Info describes a workspace.
type Info struct {
	Name string `json:"name"`
	// Branch is the volume's branch that holds the workspace: Name, or
	// virtual-Name for a virtual workspace.
	Branch string `json:"branch"`
	Status Status `json:"status"`
	// HeadCommit is the branch's newest commit ("branch@seq"); a mounted
	// workspace's newer writes are not in it until they are committed
	// (every few seconds, on sync and at unmount).
	HeadCommit string `json:"head_commit"`
	// BytesWaiting is an upper bound of the bytes written to the mount
	// and not yet uploaded (0 when unmounted: unmounting uploads all).
	BytesWaiting int64     `json:"bytes_waiting"`
	Created      time.Time `json:"created"`
	LastUsed     time.Time `json:"last_used"`
	// ExpiresAt is when the lifetime ends; nil without a lifetime.
	ExpiresAt      *time.Time `json:"expires_at,omitempty"`
	DeleteOnExpiry bool       `json:"delete_on_expiry,omitempty"`
	// Expired: the lifetime ended (ErrExpired on Acquire).
	Expired bool `json:"expired,omitempty"`
	Virtual bool `json:"virtual"`
	// Base is a virtual workspace's base: "snapshot:S" (or another
	// reference) or a host directory.
	Base string `json:"base,omitempty"`
	// From is what the workspace was created from: "" (empty),
	// "snapshot:S", or the name of the workspace it forks.
	From     string            `json:"from,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Backend is the exec backend its commands run with (its creator's
	// choice completed with the daemon's defaults).
	Backend exec.Spec `json:"backend"`
}

// CreateRequest describes a workspace to create.
type CreateRequest struct {
	Name string `json:"name"`
	// From: "" an empty workspace; "snapshot:S" the snapshot S of the
	// volume; else the name of a workspace to fork (its head, after a
	// sync when it is mounted). Not with Virtual.
	From string `json:"from,omitempty"`
	// Virtual makes a copy-on-write workspace over Base: nothing it does
	// changes Base; its changes are listed, committed and discarded
	// through the mount's control socket.
	Virtual bool `json:"virtual,omitempty"`
	// Base, for Virtual: "snapshot:S" (or any reference of the volume:
	// branch:B, B@SEQ) or an absolute host directory the daemon can read.
	Base string `json:"base,omitempty"`
	// Lifetime ends the workspace that long after creation; 0: never.
	Lifetime time.Duration `json:"lifetime,omitempty"`
	// DeleteOnExpiry deletes the workspace (its branch too) when its
	// lifetime ends; otherwise its data stays.
	DeleteOnExpiry bool              `json:"delete_on_expiry,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	// Backend chooses the exec backend of its commands; nil: the daemon's
	// (Config.Backend at each mount). Its empty docker options take the
	// daemon's. With docker and a User, an empty workspace's root belongs
	// to User, so that the commands can write in it.
	Backend *exec.Spec `json:"backend,omitempty"`
}

// Manager owns the workspaces of one daemon. Safe for concurrent use.
type Manager struct {
	cfg       Config
	log       *slog.Logger
	url       string // the store URL (the default store's resolved)
	stateDir  string // absolute, symlinks resolved
	lockFile  *os.File
	store     *blobstore.Store
	repo      *snapshot.Repo
	keySecret []string // the volume key's assignment for mount servers' secrets; set by Open

	mu     sync.Mutex
	ws     map[string]*wsState // guarded by mu
	closed bool                // guarded by mu

	stop     chan struct{} // closed by Close: the lifecycle loop ends
	loopDone chan struct{}
}

// wsState is one workspace in memory. Every field is guarded by
// Manager.mu.
type wsState struct {
	rec record
	// op is non-nil while the workspace is being created, mounted,
	// unmounted or deleted; it is closed (and set to nil) when that
	// ends. Whoever sets it owns the transition.
	op       chan struct{}
	mounting bool     // op is a mount: counts against MaxMounted
	mnt      *mounted // nil when unmounted
	pins     int      // Handles held
	// watchers counts the Handles of Watch (change feeds): like pins they
	// keep the workspace mounted, but they never stop Delete.
	watchers int
	lastUsed time.Time
}

// Open opens the manager of the workspaces under cfg.StateDir, in the
// volume of cfg.StoreURL (initializing the embedded default store on
// first use). It takes the state directory's lock (a second daemon on the
// same state directory fails), then recovers what a daemon killed before
// left: mount servers still answering are adopted (their workspaces stay
// mounted), stale mounts are unmounted (their caches keep every change
// for the next mount), commands it left running in workspaces are
// killed, its containers are removed, and creations or removals that were cut short are
// finished or undone.
func Open(ctx context.Context, cfg Config) (*Manager, error) {
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxMounted < 0 {
		return nil, fmt.Errorf("max mounted %d: %w (0 means no cap)", cfg.MaxMounted, ErrInvalidArgument)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if s := cfg.Backend; s.Type != "" && s.Type != exec.TypeLocal && !s.Docker() {
		return nil, fmt.Errorf("backend %q: %w: want %q or %q", s.Type, ErrInvalidArgument, exec.TypeLocal, exec.TypeDocker)
	}
	if cfg.Backend.Docker() {
		if err := cfg.Backend.Validate(); err != nil {
			return nil, fmt.Errorf("default backend: %w: %w", ErrInvalidArgument, err)
		}
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = min(max(cfg.IdleTimeout/10, time.Second), 30*time.Second)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, ws: map[string]*wsState{}, stop: make(chan struct{}), loopDone: make(chan struct{})}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	dir := cfg.StateDir
	if dir == "" {
		var err error
		if dir, err = DefaultStateDir(); err != nil {
			return nil, err
		}
	}
	if err := m.lockStateDir(dir); err != nil {
		return nil, err
	}
	autoInit := cfg.StoreURL == ""
	m.url = cfg.StoreURL
	if autoInit {
		u, err := mountproc.DefaultStoreURL()
		if err != nil {
			m.unlock()
			return nil, err
		}
		m.url = u
	}
	var keys snapshot.KeySource
	if cfg.Keys != nil {
		keys = func(passphrase bool) (snapshot.UserKey, error) {
			k, err := cfg.Keys(passphrase)
			if err == nil {
				m.keySecret = volkey.Assignment(k)
			}
			return k, err
		}
	}
	store, repo, err := mountproc.OpenRepo(ctx, m.url, autoInit, keys)
	if err != nil {
		m.unlock()
		if errors.Is(err, snapshot.ErrNoVolume) {
			return nil, fmt.Errorf("store %s: %w (run `agentfs init %s` first)", blobstore.DisplayURL(m.url), err, blobstore.DisplayURL(m.url))
		}
		return nil, fmt.Errorf("open store %s: %w", blobstore.DisplayURL(m.url), err)
	}
	m.store, m.repo = store, repo
	if err := m.recover(ctx); err != nil {
		m.closeStore()
		return nil, err
	}
	go m.loop()
	return m, nil
}

// lockStateDir creates the state directory and takes its lock.
func (m *Manager) lockStateDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "workspaces"), 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	m.stateDir = abs
	f, err := os.OpenFile(filepath.Join(abs, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("state dir lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("state dir %s is in use by another agentfs serve: stop it, or pass another --state-dir", abs)
		}
		return fmt.Errorf("lock state dir %s: %w", abs, err)
	}
	m.lockFile = f
	return nil
}

func (m *Manager) unlock() {
	if m.lockFile != nil {
		_ = m.lockFile.Close() // releases the flock
	}
}

func (m *Manager) closeStore() {
	m.repo.Close()
	_ = m.store.Close()
	m.unlock()
}

// Close stops the lifecycle goroutine, then syncs and unmounts every
// mounted workspace (killing the commands still running in them through
// their Handles' backends; a mount still in use by other processes is
// detached lazily) and releases the state directory. Data is in the store
// when Close returns nil. Later calls return ErrClosed from every method
// but Close, which returns nil.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	<-m.loopDone

	var errs []error
	for _, name := range m.names() {
		m.mu.Lock()
		ws := m.ws[name]
		if ws == nil || !m.waitOpLocked(ctx, ws) {
			m.mu.Unlock()
			if ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("workspace %s: %w", name, ctx.Err()))
			}
			continue
		}
		mnt := ws.mnt
		ws.op = make(chan struct{})
		m.mu.Unlock()
		var err error
		if mnt != nil {
			err = m.unmount(ctx, ws.rec.Name, mnt)
		}
		m.mu.Lock()
		if err == nil && mnt != nil {
			ws.mnt = nil
			ws.rec.LastUsed = ws.lastUsed
			err = m.saveRecord(ws.rec)
		}
		m.endOpLocked(ws)
		m.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("workspace %s: %w", name, err))
		}
	}
	m.closeStore()
	return errors.Join(errs...)
}

// names returns the names of the workspaces, sorted.
func (m *Manager) names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.ws))
	for n := range m.ws {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// waitOpLocked waits (releasing mu meanwhile) until ws has no transition
// in progress. It returns false when ctx ended first. mu is held again on
// return.
func (m *Manager) waitOpLocked(ctx context.Context, ws *wsState) bool {
	for ws.op != nil {
		ch := ws.op
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			m.mu.Lock()
			return false
		}
		m.mu.Lock()
	}
	return true
}

// endOpLocked ends ws's transition, waking its waiters.
func (m *Manager) endOpLocked(ws *wsState) {
	close(ws.op)
	ws.op, ws.mounting = nil, false
}

// spec is the exec backend of the workspace of r: its own, or the
// daemon's, with the daemon's docker options for those it left empty.
func (m *Manager) spec(r record) exec.Spec {
	d := m.cfg.Backend
	if r.Backend == nil {
		if !d.Docker() {
			return exec.Spec{Type: exec.TypeLocal}
		}
		return d
	}
	s := *r.Backend
	if s.Type == "" {
		s.Type = exec.TypeLocal
	}
	if !s.Docker() {
		return s
	}
	if s.Image == "" {
		s.Image = d.Image
	}
	if s.User == "" {
		s.User = d.User
	}
	s.Network = s.Network || d.Network
	if s.Memory == 0 {
		s.Memory = d.Memory
	}
	if s.CPUs == 0 {
		s.CPUs = d.CPUs
	}
	if s.Pids == 0 {
		s.Pids = d.Pids
	}
	return s
}

// now is the manager's clock.
func (m *Manager) now() time.Time { return m.cfg.Now() }

// wsDir is the directory of workspace name under the state directory.
func (m *Manager) wsDir(name string) string { return filepath.Join(m.stateDir, "workspaces", name) }

// info describes ws from its record and state; the caller holds mu and
// then calls fill without it.
func (m *Manager) info(ws *wsState) Info {
	r := ws.rec
	in := Info{
		Name: r.Name, Branch: r.Branch, Status: StatusUnmounted, Created: r.Created, LastUsed: ws.lastUsed,
		ExpiresAt: r.ExpiresAt, DeleteOnExpiry: r.DeleteOnExpiry, Expired: r.Expired,
		Virtual: r.Virtual, Base: r.Base, From: r.From, Metadata: maps.Clone(r.Metadata),
		Backend: m.spec(r),
	}
	if ws.mnt != nil {
		in.Status = StatusMounted
	}
	return in
}

// fill adds the head commit and the bytes waiting to in, asking the mount
// ctl (nil when unmounted) or the store. Errors leave them empty: a
// listing shows what it can.
func (m *Manager) fill(ctx context.Context, in *Info, ctl *control.Client) {
	if ctl != nil {
		if st, err := ctl.Status(ctx); err == nil {
			in.HeadCommit = snapshot.CommitID{Branch: in.Branch, Seq: st.Volume.HeadSeq}.String()
			in.BytesWaiting = st.Volume.DirtyBytes
			return
		}
	}
	if seq, err := m.repo.HeadSeq(ctx, in.Branch); err == nil {
		in.HeadCommit = snapshot.CommitID{Branch: in.Branch, Seq: seq}.String()
	}
}

// listConcurrency bounds the mounts and store requests List makes at once.
const listConcurrency = 8

// List describes every workspace, sorted by name (those being created or
// deleted are left out).
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	type item struct {
		in  Info
		ctl *control.Client
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	var items []item
	for _, ws := range m.ws {
		if ws.rec.State != stateReady {
			continue
		}
		it := item{in: m.info(ws)}
		if ws.mnt != nil {
			it.ctl = ws.mnt.ctl
		}
		items = append(items, it)
	}
	m.mu.Unlock()
	// Each fill is a control request (which lists the store's refs) or a
	// store request: a few at a time, so that a long list stays quick.
	out := make([]Info, len(items))
	var g errgroup.Group
	g.SetLimit(listConcurrency)
	for i := range items {
		g.Go(func() error {
			m.fill(ctx, &items[i].in, items[i].ctl)
			out[i] = items[i].in
			return nil
		})
	}
	_ = g.Wait()
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Mounted returns the number of mounted workspaces, without asking the
// mounts or the store (for metrics).
func (m *Manager) Mounted() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, ws := range m.ws {
		if ws.mnt != nil {
			n++
		}
	}
	return n
}

// Get describes workspace name: ErrNotFound if there is none.
func (m *Manager) Get(ctx context.Context, name string) (Info, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Info{}, ErrClosed
	}
	ws := m.ws[name]
	if ws == nil || ws.rec.State != stateReady {
		m.mu.Unlock()
		return Info{}, fmt.Errorf("workspace %s: %w", name, ErrNotFound)
	}
	in := m.info(ws)
	var ctl *control.Client
	if ws.mnt != nil {
		ctl = ws.mnt.ctl
	}
	m.mu.Unlock()
	m.fill(ctx, &in, ctl)
	return in, nil
}
