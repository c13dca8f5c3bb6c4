// A depguard probe (scripts/depguard-probes.sh): each import names the
// rules of .golangci.yml that must deny it; one without a name must pass.
package probe

import (
	_ "github.com/agentfs/agentfs/blobstore"        // depguard: -
	_ "github.com/agentfs/agentfs/blobstore/faulty" // depguard: -
	_ "github.com/agentfs/agentfs/overlay"          // depguard: cache cache-commit
)
