// Package mountproc starts and finds agentfs mount server processes: the
// embedded default store, initializing a volume, starting `agentfs mount`
// in a process of its own and waiting until its mount is ready, and
// cleaning up a stale mount left by a server that was killed.
//
// It is shared by the agentfs command (`agentfs mount -d`, `agentfs run`)
// and by the serve daemon's workspace manager, so both start mount
// servers the same way. A process that calls Start never serves the mount
// itself: the mount is served by the child.
package mountproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/snapshot"
)

// URLSecret names the store URL among the secrets of a mount server started
// by Start (ReadSecrets): not in argv, since a URL may carry credentials
// and any user can read another's command line, nor in the environment.
const URLSecret = "AGENTFS_MOUNT_URL"

// OwnerEnv, set to a process id in a mount server's environment, ties the
// server to that process: once it has exited, the server syncs, unmounts
// and exits, as after SIGTERM (mountd.Config.OwnerPID). Test harnesses
// (fs/fstest) set it to their own pid, so that a test binary that is
// killed (go test -timeout) leaves no mount server and no mount behind.
// Nothing else sets it: a server without it outlives whoever started it,
// as `agentfs mount -d` promises.
const OwnerEnv = "AGENTFS_TEST_OWNER_PID"

// DefaultStoreDir is the directory of the embedded default store:
// $XDG_DATA_HOME/agentfs/default, or ~/.local/share/agentfs/default.
func DefaultStoreDir() (string, error) {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the default store: %w (set XDG_DATA_HOME or HOME, or give a store URL)", err)
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, "agentfs", "default"), nil
}

// DefaultStoreURL is the file:// URL of the embedded default store.
func DefaultStoreURL() (string, error) {
	dir, err := DefaultStoreDir()
	if err != nil {
		return "", err
	}
	return "file://" + dir, nil
}

// OpenRepo opens the store at url and the volume in it. With autoInit (the
// embedded default store), a store without a volume gets one first
// (InitVolume; a missing file:// directory is created); otherwise that is an
// error matching snapshot.ErrNoVolume, or, for a file:// directory that does
// not exist, blobstore.Open's error (which names it and says to run agentfs
// init): nothing is created. keys supplies the key of an encrypted volume
// (snapshot.OpenWithKey); the default store is created plain. The caller
// closes the repo and then the store.
func OpenRepo(ctx context.Context, url string, autoInit bool, keys snapshot.KeySource) (*blobstore.Store, *snapshot.Repo, error) {
	store, err := blobstore.Open(ctx, url, blobstore.Options{Create: autoInit})
	if err != nil {
		return nil, nil, err
	}
	repo, err := snapshot.OpenWithKey(ctx, store, keys)
	if errors.Is(err, snapshot.ErrNoVolume) && autoInit {
		if _, err = InitVolume(ctx, store, nil); err == nil {
			repo, err = snapshot.OpenWithKey(ctx, store, keys)
		}
	}
	if err != nil {
		_ = store.Close()
		return nil, nil, err
	}
	return store, repo, nil
}

// InitVolume makes store hold a volume with branch main, whose first
// commit is an empty root directory owned by the calling user (what
// `agentfs init` does). It finishes a volume whose first commit is missing
// (an init that was interrupted). created is false if the volume and its
// branch already existed, which is no error here. With key non-nil the
// volume is encrypted (snapshot.InitEncrypted) and key opens an existing
// one.
func InitVolume(ctx context.Context, store *blobstore.Store, key *snapshot.UserKey) (created bool, err error) {
	now := time.Now()
	var repo *snapshot.Repo
	var keys snapshot.KeySource
	if key != nil {
		keys = func(bool) (snapshot.UserKey, error) { return *key, nil }
		repo, err = snapshot.InitEncrypted(ctx, store, snapshot.NewConfig(now), *key)
	} else {
		repo, err = snapshot.Init(ctx, store, snapshot.NewConfig(now))
	}
	if errors.Is(err, snapshot.ErrVolumeExists) {
		repo, err = snapshot.OpenWithKey(ctx, store, keys)
	}
	if err != nil {
		return false, err
	}
	defer repo.Close()
	if _, err := repo.HeadSeq(ctx, snapshot.DefaultBranch); err == nil {
		return false, nil
	} else if !errors.Is(err, snapshot.ErrNoCommits) {
		return false, err
	}
	host, _ := os.Hostname()
	_, err = repo.CreateBranchEmpty(ctx, snapshot.DefaultBranch, 0o755, uint32(os.Getuid()), uint32(os.Getgid()), now, host, "agentfs init")
	if errors.Is(err, snapshot.ErrCommitExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create the first commit of %s: %w", store.URL(), err)
	}
	return true, nil
}

// CleanStale unmounts a stale agentfs mount on mnt: one whose server does
// not answer its control socket (it was killed), even while the kernel
// still answers stat from its cache, and any other mount that no longer
// answers ("transport endpoint is not connected"). It reports whether it
// cleaned one up. A live mount is left alone.
func CleanStale(ctx context.Context, mnt string) (bool, error) {
	if on, _ := afs.IsMountPoint(mnt); on {
		if _, err := control.Find(ctx, mnt); errors.Is(err, control.ErrNotRunning) {
			if err := afs.Unmount(mnt, true); err != nil && !errors.Is(err, afs.ErrNotMounted) {
				return false, fmt.Errorf("clean up the stale mount on %s: %w", mnt, err)
			}
			return true, nil
		}
	}
	return afs.CleanStale(mnt)
}

// Spec says which mount server Start runs.
type Spec struct {
	// Exe is the agentfs executable; "" means this process's own.
	Exe string
	// URL of the store; "" lets the server use the embedded default store.
	URL string
	// MountPoint is the directory to mount on (absolute).
	MountPoint string
	// CacheDir is the mount's cache directory (absolute; created if
	// missing). The server's log is mount.log in it.
	CacheDir string
	// Flags are further `agentfs mount` flags (--branch, --virtual, ...).
	Flags []string
	// Env is the server's environment; nil means this process's. Either
	// way the server gets it through ServerEnv, and without the volume's
	// key (AGENTFS_KEY, AGENTFS_PASSPHRASE), which move to its secrets
	// pipe, nor the new key of a rotation (AGENTFS_NEW_*) or the admin
	// token (AGENTFS_TOKEN), which it does not need.
	Env []string
	// Secrets are NAME=VALUE assignments the server reads from its
	// secrets pipe (ReadSecrets), after those taken from Env, so they
	// win: volkey.Assignment of the volume's key.
	Secrets []string
}

// Process is a mount server started by Start.
type Process struct {
	// PID is the server's process id.
	PID int
	// Log is the path of the server's log file.
	Log string

	exited chan struct{}
}

// Exited is closed once the server process has exited (and was reaped).
func (p *Process) Exited() <-chan struct{} { return p.exited }

// readyTimeout bounds the wait for the server's exit after it closed its
// readiness pipe without an answer.
const readyTimeout = 5 * time.Second

// Start runs `agentfs mount --ready-fd=3 --secrets-fd=4 --cache-dir=DIR
// FLAGS MOUNTPOINT` as a new session (so signals to the caller's process
// group do not reach it), with its output appended to mount.log in the
// cache directory. Its secrets (the volume's key from Env and Secrets, the
// URL) reach it through the pipe on descriptor 4, which it reads once at
// start, never through its environment or argv; a server that finds them
// cut short (ReadSecrets) fails rather than mount the default store for
// want of a URL. Start waits until the
// server reports the mount ready: then the mount answers on its
// mount point and control socket. A server that fails reports why, and
// that is Start's error. When ctx ends first, the server is asked to stop
// (SIGTERM) and ctx's error returned. The caller's process reaps the
// server when it exits (see Process.Exited); it stays running when the
// caller exits.
func Start(ctx context.Context, s Spec) (*Process, error) {
	exe := s.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the agentfs executable: %w", err)
		}
	}
	if err := os.MkdirAll(s.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("cache dir: %w", err)
	}
	logPath := filepath.Join(s.CacheDir, "mount.log")
	if st, err := os.Stat(logPath); err == nil && st.Size() > 16<<20 {
		_ = os.Rename(logPath, logPath+".1")
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mount log: %w", err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	env := s.Env
	if env == nil {
		env = os.Environ()
	}
	env, secrets := splitSecrets(env)
	secrets = append(secrets, s.Secrets...)
	if s.URL != "" {
		secrets = append(secrets, URLSecret+"="+s.URL)
	}
	sr, err := secretsPipe(secrets)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	args := append([]string{"mount", "--ready-fd=3", "--secrets-fd=" + strconv.Itoa(SecretsFD), "--cache-dir=" + s.CacheDir}, s.Flags...)
	args = append(args, s.MountPoint)
	c := exec.Command(exe, args...)
	c.Dir = "/"
	c.Env = ServerEnv(env)
	c.Stdout, c.Stderr = logf, logf
	c.ExtraFiles = []*os.File{w, sr} // descriptors 3 and SecretsFD
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = c.Start()
	// The server has its copies. Without ours, the readiness pipe ends
	// when it exits, and the secrets' writer gets EPIPE if it exits
	// before reading them.
	_ = w.Close()
	_ = sr.Close()
	if err != nil {
		return nil, fmt.Errorf("start the mount server: %w", err)
	}
	p := &Process{PID: c.Process.Pid, Log: logPath, exited: make(chan struct{})}
	waitErr := make(chan error, 1)
	go func() {
		err := c.Wait()
		waitErr <- err
		close(p.exited)
	}()
	msg, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	reply := strings.TrimSpace(string(msg))
	if reply == "ok" {
		return p, nil
	}
	select {
	case err := <-waitErr:
		if reply == "" {
			reply = fmt.Sprintf("the mount server exited (%v) before the mount was ready; see %s", err, logPath)
		}
	case <-time.After(readyTimeout):
		_ = c.Process.Kill()
		if reply == "" {
			reply = "the mount server closed its readiness pipe without an answer; see " + logPath
		}
	case <-ctx.Done():
		_ = c.Process.Signal(syscall.SIGTERM)
		return nil, ctx.Err()
	}
	return nil, errors.New(reply)
}
