package control

// The URL door: a volume opened by the client itself, served in-process by
// the same registry of calls as a mount, so that a history command makes
// the same calls on a store URL as on a MOUNTPOINT.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/agentfs/agentfs/cache"
	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/snapshot"
)

// ServeRepo serves repo (opened by the caller) in this process, as a
// mount's server serves its volume, and returns a client of that server.
// Calls that need a mount (sync, status, unmount, invalidate, the virtual
// and change-feed calls, a checkpoint, and so a diff against "live") fail;
// a snapshot is saved of, and a restore applied to, the default branch's
// head. stop shuts the server down; the caller then closes repo.
func ServeRepo(repo *snapshot.Repo, log *slog.Logger) (c *Client, stop func()) {
	l := &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
	s := NewServer(Info{URL: repo.URL(), Branch: snapshot.DefaultBranch}, repoBackend{repo}, nil, log)
	go func() { _ = s.Serve(l) }()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return l.dial(ctx) }}
	c = &Client{socket: "(in-process server of " + repo.URL() + ")", hc: &http.Client{Transport: tr}}
	return c, func() {
		tr.CloseIdleConnections()
		_ = s.Shutdown(context.Background())
		_ = l.Close()
	}
}

// repoBackend serves a volume without a mount.
type repoBackend struct{ repo *snapshot.Repo }

func (b repoBackend) notMount() error {
	return fmt.Errorf("%s is a store URL: %w", b.repo.URL(), ErrNotMount)
}

func (b repoBackend) Sync(context.Context) error { return b.notMount() }
func (b repoBackend) Status(context.Context) (cache.Status, error) {
	return cache.Status{}, b.notMount()
}
func (b repoBackend) Unmount(context.Context, bool) error { return b.notMount() }
func (b repoBackend) Ops() []afs.OpStats                  { return nil }
func (b repoBackend) Invalidate(Invalidation) error       { return b.notMount() }

// Checkpoint fails: a URL has no live state.
func (b repoBackend) Checkpoint(context.Context, string) (snapshot.CommitID, error) {
	return snapshot.CommitID{}, fmt.Errorf("a store URL has no live state: name the MOUNTPOINT instead of the URL %s", b.repo.URL())
}

// SaveSnapshot names the default branch's head.
func (b repoBackend) SaveSnapshot(ctx context.Context, name, message string) (snapshot.Snapshot, error) {
	return b.repo.SaveSnapshot(ctx, name, snapshot.CommitID{Branch: snapshot.DefaultBranch}, snapshot.SaveOptions{Message: message})
}

// Restore restores the default branch to ref.
func (b repoBackend) Restore(ctx context.Context, ref, message string) (snapshot.RestoreResult, error) {
	return b.repo.Restore(ctx, ref, snapshot.DefaultBranch, snapshot.RestoreOptions{Message: message})
}

// Repo is the volume.
func (b repoBackend) Repo() *snapshot.Repo { return b.repo }

// memListener is a net.Listener whose connections are in-process pipes.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial connects to the listener.
func (l *memListener) dial(ctx context.Context) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case l.conns <- a:
		return b, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "in-process" }
