// A depguard probe (scripts/depguard-probes.sh): each import names the
// rules of .golangci.yml that must deny it; one without a name must pass.
package probe

import (
	_ "github.com/agentfs/agentfs/fs"         // depguard: serve
	_ "github.com/agentfs/agentfs/fs/control" // depguard: -
	_ "github.com/agentfs/agentfs/fs/mountd"  // depguard: serve
	_ "github.com/hanwen/go-fuse/v2/fs"       // depguard: serve
)
