package fs

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/fs/changefeed"
)

// FSType is the subtype every agentfs mount has: /proc/self/mountinfo lists
// it as "fuse.agentfs".
const FSType = "agentfs"

// DefaultCacheTimeout is how long the kernel trusts entries (positive and
// negative) and attributes it got from the mount. See the package doc for
// why it is long.
const DefaultCacheTimeout = time.Hour

// ErrBusy is matched by the error of Server.Unmount when a process still
// uses the mount (an open file or a working directory inside it).
var ErrBusy = errors.New("mount is busy")

// ErrNotMounted is matched by the error of Unmount when the directory is
// not a mount point.
var ErrNotMounted = errors.New("not mounted")

// Options configure Mount.
type Options struct {
	// FsName is the mount's source as mountinfo and df show it (for
	// example "agentfs:/home/u/.cache/agentfs/mounts/ab12"). Required.
	FsName string
	// AllowOther lets every user, including containers' users, use the
	// mount (allow_other; with default_permissions the kernel checks the
	// files' modes). Non-root servers need user_allow_other in
	// /etc/fuse.conf.
	AllowOther bool
	// ReadOnly mounts read-only ("ro"): the kernel fails every change with
	// EROFS before it reaches the server. The volume must be opened
	// read-only as well.
	ReadOnly bool
	// CacheTimeout is how long the kernel caches entries, negative entries
	// and attributes; 0 means DefaultCacheTimeout. Changes the engine makes
	// on its own must be announced through the Server's Invalidate methods.
	CacheTimeout time.Duration
	// Logger receives errors the kernel's callers cannot see (unknown
	// engine errors, panics); default slog.Default().
	Logger *slog.Logger
	// Debug logs every FUSE request and reply to Logger (very verbose).
	Debug bool
	// Atime says when reads update access times; the zero value is
	// NoAtime.
	Atime Atime
	// Dev lets device nodes of the mount reach their devices ("dev");
	// without it opening one fails with EACCES ("nodev", the default).
	// Whoever can create a device node in the mount (root in a container
	// bind-mounting it, or a volume written elsewhere) could otherwise
	// reach any device of this machine through it.
	Dev bool
	// Suid honours set-user-ID and set-group-ID bits and file capabilities
	// of programs run from the mount ("suid"); without it they run with
	// the caller's privileges ("nosuid", the default). A volume's files
	// may come from anywhere (a store others write, a snapshot, a
	// container's root): with Suid, any set-user-ID-root program in it is
	// a root shell for every local user.
	Suid bool
	// Tuning overrides the measured FUSE settings, for experiments
	// (scripts/mount-perf.sh); the zero value keeps them.
	Tuning Tuning
}

// Server is a mounted volume. Its methods may be called from any
// goroutine, but never from a FUSE request handler of the same mount (see
// the Invalidate methods).
type Server struct {
	fuse *fuse.Server
	root *node
	mnt  string
	log  *slog.Logger

	unmountMu sync.Mutex // serialises Unmount
}

// Mount mounts vol on the directory mountpoint (which must exist) and
// serves it until it is unmounted, by Server.Unmount or from outside
// (umount, fusermount3 -u). It returns once the kernel has answered the
// first request, so the mount is usable. The caller keeps ownership of
// vol and closes it after Wait returns.
//
// Never call Mount from a process that also runs commands inside the
// mount: forking a child whose working directory, executable or inherited
// files are on the mount can deadlock the server (go-fuse fs/api.go,
// "Deadlocks"). Serve it from a process of its own.
func Mount(mountpoint string, vol *cache.Volume, opts Options) (*Server, error) {
	if vol == nil || opts.FsName == "" {
		return nil, fmt.Errorf("fs.Mount: volume and FsName are required: %w", cache.ErrInvalid)
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	tun := opts.Tuning.withDefaults()
	timeout := opts.CacheTimeout
	if timeout <= 0 {
		timeout = DefaultCacheTimeout
	}
	fsys := &filesystem{vol: vol, log: lg, readOnly: opts.ReadOnly, keepCache: !tun.NoKeepCache, dirCache: !tun.NoDirCache, noFlush: tun.NoFlush, directWr: tun.DirectWrite, posixACL: tun.PosixACL, atime: opts.Atime,
		gen: vol.Generation(), changes: changefeed.New()}
	caps := uint64(fuse.CAP_HANDLE_KILLPRIV_V2 | fuse.CAP_EXPORT_SUPPORT)
	if tun.Writeback {
		caps |= fuse.CAP_WRITEBACK_CACHE
	}
	root := &node{fsys: fsys}
	mo := []string{"default_permissions"}
	if opts.Atime == NoAtime {
		mo = append(mo, "noatime")
	}
	if opts.ReadOnly {
		mo = append(mo, "ro")
	}
	if opts.Dev {
		mo = append(mo, "dev")
	}
	if opts.Suid {
		mo = append(mo, "suid")
	}
	gopts := &gofs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther:    opts.AllowOther,
			Options:       mo,
			FsName:        opts.FsName,
			Name:          FSType,
			MaxWrite:      tun.MaxWrite,
			MaxReadAhead:  tun.MaxReadAhead,
			MaxBackground: tun.MaxBackground,
			// Kernel caching and parallelism; see doc.go.
			ExplicitDataCacheControl: true,
			EnableSymlinkCaching:     true,
			EnableAcl:                tun.PosixACL,
			ExtraCapabilities:        caps,
			// Locks stay in the kernel: flock and fcntl locks are
			// local to this machine, which is the only one that can
			// see this mount.
			EnableLocks:  false,
			PanicHandler: panicHandler(lg),
			Debug:        opts.Debug,
			Logger:       log.New(slogWriter{lg}, "", 0),
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		// FUSE node IDs are the engine's inode numbers, which are never
		// reused: notifications can name any inode without a table.
		ExternalNodeID:  true,
		NullPermissions: true,
		RootStableAttr:  &gofs.StableAttr{Ino: cache.RootIno, Gen: uint64(fsys.gen)},
		Logger:          log.New(slogWriter{lg}, "go-fuse: ", 0),
	}
	if opts.Atime == StrictAtime {
		// fusermount3 (3.14) knows no strictatime: a server running as
		// root mounts directly, with the flag; otherwise the mount falls
		// back to fusermount3 and reports relatime (the kernel's default,
		// as for RelAtime), while the server updates access times
		// strictly all the same.
		gopts.DirectMount = true
		gopts.DirectMountFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_STRICTATIME
	}
	raw := &rawFS{RawFileSystem: gofs.NewNodeFS(root, gopts), fsys: fsys}
	srv, err := fuse.NewServer(raw, mountpoint, &gopts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	fsys.server.Store(srv)
	fsys.io.prune = srv.PruneNotify
	go func() {
		srv.Serve()
		fsys.changes.Close("unmounted")
	}()
	if err := srv.WaitMount(); err != nil {
		// The serve loop ends by itself when the mount failed.
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	if tun.Passthrough {
		if os.Geteuid() == 0 && srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0 {
			fsys.passthrough.Store(true)
		} else {
			lg.Warn("FUSE passthrough asked for (--tune passthrough=1) but unavailable: it needs a server running as root and a kernel offering it (Linux 6.9 or later); reads go through the server", "root", os.Geteuid() == 0)
		}
	}
	if os.Geteuid() == 0 {
		if mi, err := MountOf(mountpoint); err == nil && mi.MountPoint == mountpoint {
			if err := setReadAhead(mi.Dev, tun.ReadAheadKB); err != nil {
				lg.Warn("cannot raise the mount's read-ahead", "dev", mi.Dev, "err", err)
			}
		}
	}
	return &Server{fuse: srv, root: root, mnt: mountpoint, log: lg}, nil
}

// slogWriter turns go-fuse's log.Logger lines into slog records.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// MountPoint returns the directory the volume is mounted on.
func (s *Server) MountPoint() string { return s.mnt }

// Wait returns when the mount is gone (unmounted from here or outside) and
// no request is being served any more.
func (s *Server) Wait() { s.fuse.Wait() }

// Unmount detaches the mount. Without lazy it fails with an error matching
// ErrBusy while any process has a file open or its working directory in
// the mount; with lazy the mount disappears from the namespace at once and
// is served until its last user is gone (then Wait returns). Wait after a
// successful Unmount.
func (s *Server) Unmount(lazy bool) error {
	s.unmountMu.Lock()
	defer s.unmountMu.Unlock()
	return Unmount(s.mnt, lazy)
}

// Unmount detaches the FUSE mount on dir, as Server.Unmount does, for a
// mount whose server is another process (or gone): as root with umount2(2),
// otherwise with fusermount3 -u. It fails with ErrBusy if the mount is in
// use (unless lazy) and ErrNotMounted if dir is no mount point.
func Unmount(dir string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = unix.MNT_DETACH
		}
		err := unix.Unmount(dir, flags)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("unmount %s: %w", dir, ErrBusy)
		case errors.Is(err, unix.EINVAL):
			return fmt.Errorf("unmount %s: %w", dir, ErrNotMounted)
		}
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	var stderr bytes.Buffer
	cmd := exec.Command("fusermount3", append(args, dir)...)
	cmd.Dir = "/"
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		mounted, merr := IsMountPoint(dir)
		switch {
		case merr == nil && !mounted:
			return fmt.Errorf("unmount %s: %s: %w", dir, msg, ErrNotMounted)
		case merr == nil && !lazy:
			return fmt.Errorf("unmount %s: %s: %w", dir, msg, ErrBusy)
		}
		return fmt.Errorf("unmount %s: fusermount3: %s: %w", dir, msg, err)
	}
	return nil
}

// InvalidateInode makes the kernel forget what it caches about inode ino:
// attributes, file data (or a directory's cached listing) and a symlink's
// target. It is the hook for changes the engine makes behind the kernel's
// back (restore, discard, following a branch head). An inode the kernel
// does not know is no error. Like the other Invalidate methods, it records
// a reset in the change feed (changefeed.ReasonReplaced): such changes
// have no events of their own.
//
// Never call it from a FUSE request handler of this mount: the kernel may
// need a lock the request holds, and the call would deadlock.
func (s *Server) InvalidateInode(ino uint64) error {
	s.root.fsys.changes.Reset(changefeed.ReasonReplaced)
	return notifyErr(fmt.Sprintf("invalidate inode %d", ino), s.fuse.InodeNotify(ino, 0, 0))
}

// InvalidateEntry makes the kernel forget the directory entry name in
// directory parent, positive or negative, so that the next access looks it
// up again. Use it for every name the engine creates, removes or renames on
// its own. The same caveat as for InvalidateInode applies.
func (s *Server) InvalidateEntry(parent uint64, name string) error {
	s.root.fsys.changes.Reset(changefeed.ReasonReplaced)
	return notifyErr(fmt.Sprintf("invalidate entry %q in %d", name, parent), s.fuse.EntryNotify(parent, name))
}

// InvalidateAll makes the kernel forget every entry, attribute, listing
// and page of data it caches for this mount that it got from the server,
// walking the inodes the kernel knows. Negative entries (cached "no such
// file") directly in the root survive it, up to the mount's CacheTimeout:
// a change that creates names in the root must also InvalidateEntry them.
// The same caveat as for InvalidateInode applies.
func (s *Server) InvalidateAll() error {
	s.root.fsys.changes.Reset(changefeed.ReasonReplaced)
	var errs []error
	var walk func(n *gofs.Inode)
	seen := map[uint64]bool{}
	walk = func(n *gofs.Inode) {
		ino := n.StableAttr().Ino
		if seen[ino] {
			return
		}
		seen[ino] = true
		for name, ch := range n.Children() {
			walk(ch)
			if err := s.InvalidateEntry(ino, name); err != nil {
				errs = append(errs, err)
			}
		}
		if err := s.InvalidateInode(ino); err != nil {
			errs = append(errs, err)
		}
	}
	walk(s.root.EmbeddedInode())
	return errors.Join(errs...)
}

// notifyErr converts a notification's status; ENOENT (the kernel does not
// know the inode or entry) is success.
func notifyErr(what string, st fuse.Status) error {
	if st == fuse.OK || st == fuse.ENOENT {
		return nil
	}
	return fmt.Errorf("%s: %w", what, syscall.Errno(st))
}
