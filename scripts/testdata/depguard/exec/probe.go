// A depguard probe (scripts/depguard-probes.sh): each import names the
// rules of .golangci.yml that must deny it; one without a name must pass.
package probe

import (
	_ "github.com/agentfs/agentfs/cache"              // depguard: exec
	_ "github.com/agentfs/agentfs/fs/control"         // depguard: exec exec-code
	_ "github.com/agentfs/agentfs/internal/mountexec" // depguard: exec-code
	_ "github.com/agentfs/agentfs/internal/mountproc" // depguard: exec
	_ "github.com/hanwen/go-fuse/v2/fs"               // depguard: exec
)
