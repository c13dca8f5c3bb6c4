package workspace

import "context"

// Watch returns a Handle for a change feed of workspace name, mounting it
// as Acquire does. Like any Handle it keeps the workspace mounted (no idle
// unmount, no MaxMounted eviction), but it does not stop Delete: the
// holder learns that the workspace went away when the mount's feed ends,
// and asks EndReason why. Release it when the feed closes.
func (m *Manager) Watch(ctx context.Context, name string) (*Handle, error) {
	return m.acquire(ctx, name, true)
}

// Reasons EndReason returns.
const (
	EndDeleted  = "deleted"  // the workspace was deleted
	EndExpired  = "expired"  // its lifetime ended
	EndShutdown = "shutdown" // the manager closed (the daemon stops)
)

// EndReason says why h's workspace was unmounted while h was held: one
// of EndDeleted, EndExpired, EndShutdown, or "" when none of them
// happened (its mount server went away by itself: Acquire or Watch mounts
// it again).
func (h *Handle) EndReason() string {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case h.ws.rec.Expired:
		return EndExpired
	case m.ws[h.Name] != h.ws || h.ws.rec.State == stateDeleting:
		return EndDeleted
	case m.closed:
		return EndShutdown
	}
	return ""
}

// inUse reports whether Handles hold ws (Acquire's or Watch's). The
// caller holds Manager.mu.
func (ws *wsState) inUse() bool { return ws.pins > 0 || ws.watchers > 0 }
