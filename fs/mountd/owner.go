package mountd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// errOwnerExited is the cause of Serve's context once Config.OwnerPID has
// exited.
var errOwnerExited = errors.New("the owner process exited")

// watchOwner returns ctx, cancelled with cause errOwnerExited once process
// pid has exited, and stop, which ends the watch (call it once, when
// done). The owner need not be this process's parent (a harness's
// `agentfs mount -d` exits once the mount is ready, and its server lives
// on), so parent-death signals cannot tell; a pidfd can, and it names the
// process, not a pid that may be reused. It becomes readable when the
// process exits, and waits in the runtime's poller, which Close wakes.
func watchOwner(ctx context.Context, pid int) (context.Context, func(), error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, nil, fmt.Errorf("watch the owner process %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd "+strconv.Itoa(pid))
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("watch the owner process %d: %w", pid, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Read calls back once at first, then at each readiness; an error
		// means the file was closed (stop).
		if err := rc.Read(func(fd uintptr) bool { return readable(int(fd)) }); err == nil {
			cancel(errOwnerExited)
		}
	}()
	stop := func() {
		_ = f.Close()
		<-done
		cancel(nil)
	}
	return ctx, stop, nil
}

// readable reports whether fd polls readable now.
func readable(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(p, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}
