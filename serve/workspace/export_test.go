package workspace

import "context"

// Scan runs the lifecycle scan now (idle unmounts, lifetimes), as the
// manager's goroutine does every ScanInterval.
func (m *Manager) Scan(ctx context.Context) { m.scan(ctx) }
