package control

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	afs "github.com/agentfs/agentfs/fs"
)

// Client talks to one running mount's control server. It is safe for
// concurrent use.
type Client struct {
	mountPoint string
	socket     string
	hc         *http.Client
}

// Find returns a client for the agentfs mount that holds dir (a path
// inside the mount or its mount point). It fails with an error matching
// ErrNotMount if dir is on any other filesystem, and ErrNotRunning if the
// mount's server does not answer or is not the server of that mount.
func Find(ctx context.Context, dir string) (*Client, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	m, err := afs.MountOf(abs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if m.FSType != MountFSType || !strings.HasPrefix(m.Source, SourcePrefix) {
		return nil, fmt.Errorf("%s (on %s, a %s filesystem): %w", dir, m.MountPoint, m.FSType, ErrNotMount)
	}
	c := Dial(filepath.Join(strings.TrimPrefix(m.Source, SourcePrefix), SocketName))
	c.mountPoint = m.MountPoint
	info, err := c.Info(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("agentfs mount on %s: %w (its server is gone: mount it again, or `agentfs umount --force %s`): %w",
			m.MountPoint, ErrNotRunning, m.MountPoint, err)
	}
	if info.MountPoint != m.MountPoint || info.Dev != m.Dev {
		return nil, fmt.Errorf("agentfs mount on %s (device %s): %w: its socket is served for %s (device %s)",
			m.MountPoint, m.Dev, ErrNotRunning, info.MountPoint, info.Dev)
	}
	return c, nil
}

// Dial returns a client for the control socket at path, without checking
// that a server answers there (the first request does).
func Dial(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, socket)
		},
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr}}
}

// MountPoint returns the mount point Find found ("" for a Client from
// Dial).
func (c *Client) MountPoint() string { return c.mountPoint }

// Socket returns the path of the control socket.
func (c *Client) Socket() string { return c.socket }

// Info identifies the mount.
func (c *Client) Info(ctx context.Context) (Info, error) {
	return Do(ctx, c, InfoCall, struct{}{})
}

// Status returns the mount's state: the engine's status and the blob
// store's counters.
func (c *Client) Status(ctx context.Context) (Status, error) {
	return Do(ctx, c, StatusCall, struct{}{})
}

// Stats returns the mount's cumulative counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	return Do(ctx, c, StatsCall, struct{}{})
}

// Sync returns once everything written to the mount before the call is in
// blob storage and reachable from a commit. It waits as long as ctx allows
// (the server retries a failing store).
func (c *Client) Sync(ctx context.Context) error {
	_, err := Do(ctx, c, SyncCall, struct{}{})
	return err
}

// SyncProgress runs Sync and, until it returns, calls progress with the
// mount's status every interval (from this goroutine).
func (c *Client) SyncProgress(ctx context.Context, interval time.Duration, progress func(Status)) error {
	done := make(chan error, 1)
	go func() { done <- c.Sync(ctx) }()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if st, err := c.Status(ctx); err == nil {
				progress(st)
			}
		}
	}
}

// Unmount asks the server to sync, unmount and close the volume; it
// returns once that is done, and the server process then exits. Without
// force a mount in use fails with an error matching ErrBusy; with force it
// is detached lazily (it disappears at once and is served until its last
// user closes it).
func (c *Client) Unmount(ctx context.Context, force bool) error {
	_, err := Do(ctx, c, UnmountCall, UnmountRequest{Force: force})
	return err
}

// Invalidate makes the kernel forget what inv names about the mount: the
// hook for whoever changes the volume behind the kernel's back (see
// fs.Server.InvalidateInode). It is safe to call at any time from any
// process that may use the control socket.
func (c *Client) Invalidate(ctx context.Context, inv Invalidation) error {
	_, err := Do(ctx, c, InvalidateCall, inv)
	return err
}
