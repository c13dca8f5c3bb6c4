package mountd

import (
	"github.com/agentfs/agentfs/fs/changefeed"
	"github.com/agentfs/agentfs/fs/control"
)

var _ control.ChangeSource = (*backend)(nil)

// Changes serves the mount's change feed over the control socket
// (control.ChangeSource).
func (m *backend) Changes() *changefeed.Feed { return m.srv.Changes() }
