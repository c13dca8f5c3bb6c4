package workspace

import (
	"context"
	"time"
)

// loop runs the lifecycle scan every ScanInterval until Close.
func (m *Manager) loop() {
	defer close(m.loopDone)
	t := time.NewTicker(m.cfg.ScanInterval)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-m.stop
		cancel()
	}()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			m.scan(ctx)
		}
	}
}

// scan ends the lifetimes that are over and unmounts the workspaces idle
// for IdleTimeout, by the manager's clock.
func (m *Manager) scan(ctx context.Context) {
	now := m.now()
	var expired []string
	var idle []*wsState
	m.mu.Lock()
	for name, ws := range m.ws {
		r := &ws.rec
		switch {
		case r.State != stateReady:
		case r.ExpiresAt != nil && !r.Expired && !now.Before(*r.ExpiresAt):
			r.Expired = true
			if err := m.saveRecord(*r); err != nil {
				m.log.Warn("could not save the record", "workspace", name, "err", err)
			}
			expired = append(expired, name)
		case r.Expired && r.DeleteOnExpiry && ws.op == nil:
			// Its removal failed, or a daemon was killed before it.
			expired = append(expired, name)
		case ws.mnt != nil && ws.op == nil && !ws.inUse() && (r.Expired || now.Sub(ws.lastUsed) >= m.cfg.IdleTimeout):
			// Idle, or expired and mounted again by a daemon adopting it.
			idle = append(idle, ws)
		}
	}
	m.mu.Unlock()
	for _, name := range expired {
		m.expire(ctx, name)
	}
	for _, ws := range idle {
		m.mu.Lock()
		// Look again: it may have been used or changed meanwhile.
		if ws.mnt != nil && ws.op == nil && !ws.inUse() && (ws.rec.Expired || m.now().Sub(ws.lastUsed) >= m.cfg.IdleTimeout) && !m.closed {
			m.log.Info("idle: syncing and unmounting", "workspace", ws.rec.Name, "idle_timeout", m.cfg.IdleTimeout)
			m.unmountLocked(ctx, ws)
		}
		m.mu.Unlock()
	}
}

// expire ends workspace name's lifetime: OnExpire is told (so that its
// jobs are stopped), then the commands still running in it are killed and
// it is synced and unmounted, and deleted if its creator asked for it.
func (m *Manager) expire(ctx context.Context, name string) {
	m.log.Info("lifetime ended", "workspace", name)
	if m.cfg.OnExpire != nil {
		m.cfg.OnExpire(name)
	}
	m.mu.Lock()
	ws := m.ws[name]
	if ws == nil || !m.waitOpLocked(ctx, ws) || m.closed {
		m.mu.Unlock()
		return
	}
	del := ws.rec.DeleteOnExpiry
	if !del && ws.mnt != nil {
		m.unmountLocked(ctx, ws)
	}
	m.mu.Unlock()
	if del {
		if err := m.delete(ctx, name, true); err != nil {
			m.log.Error("delete after the lifetime ended", "workspace", name, "err", err)
		}
	}
}
