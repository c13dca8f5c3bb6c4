package control

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxSockPath is the longest path a unix socket address holds (sun_path
// less its terminating NUL).
const maxSockPath = 107

// shortPath returns a path for the socket at path that fits a socket
// address: path itself, or, if it is too long, the same file reached
// through /proc/self/fd of its directory, opened O_PATH. release closes
// that descriptor; call it once bind or connect returned.
func shortPath(path string) (short string, release func(), err error) {
	if len(path) <= maxSockPath {
		return path, func() {}, nil
	}
	dir, name := filepath.Split(path)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	short = "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name
	if len(short) > maxSockPath {
		_ = unix.Close(fd)
		return "", nil, fmt.Errorf("control socket name %q is too long", name)
	}
	return short, func() { _ = unix.Close(fd) }, nil
}

// Listen creates the control socket of the mount whose cache directory is
// cacheDir, replacing a socket file left by a server that died (the caller
// holds the cache directory, so no live server uses it). The socket is
// readable and writable by its owner only.
func Listen(cacheDir string) (net.Listener, error) {
	path := filepath.Join(cacheDir, SocketName)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("remove old control socket: %w", err)
	}
	short, release, err := shortPath(path)
	if err != nil {
		return nil, err
	}
	defer release()
	l, err := net.Listen("unix", short)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	// Connecting needs write permission on the socket: owner only. (The
	// cache directory is private too; this holds for any --cache-dir.)
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	// The listener unlinks the name it was given on Close; with a
	// /proc/self/fd path that name is gone by then, so unlink the real
	// one ourselves.
	if ul, ok := l.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false)
	}
	return &unlinkListener{Listener: l, path: path}, nil
}

// unlinkListener removes the socket file when closed.
type unlinkListener struct {
	net.Listener
	path string
}

func (l *unlinkListener) Close() error {
	err := l.Listener.Close()
	_ = os.Remove(l.path)
	return err
}

// dial connects to the socket at path.
func dial(ctx context.Context, path string) (net.Conn, error) {
	short, release, err := shortPath(path)
	if err != nil {
		return nil, err
	}
	defer release()
	var d net.Dialer
	return d.DialContext(ctx, "unix", short)
}
