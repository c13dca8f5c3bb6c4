// A depguard probe (scripts/depguard-probes.sh): each import names the
// rules of .golangci.yml that must deny it; one without a name must pass.
package probe

import (
	_ "github.com/agentfs/agentfs/cache"         // depguard: volkey
	_ "github.com/agentfs/agentfs/fs/control"    // depguard: volkey
	_ "github.com/agentfs/agentfs/internal/xaes" // depguard: -
	_ "github.com/agentfs/agentfs/serve"         // depguard: volkey below-serve
	_ "github.com/agentfs/agentfs/snapshot"      // depguard: -
)
