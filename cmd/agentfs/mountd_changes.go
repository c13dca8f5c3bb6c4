package main

import "github.com/agentfs/agentfs/fs/changefeed"

// Changes serves the mount's change feed over the control socket
// (control.ChangeSource).
func (m *mountd) Changes() *changefeed.Feed { return m.srv.Changes() }
