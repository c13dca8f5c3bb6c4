// A depguard probe (scripts/depguard-probes.sh): each import names the
// rules of .golangci.yml that must deny it; one without a name must pass.
package probe

import (
	_ "github.com/agentfs/agentfs/blobstore"     // depguard: cache-ns
	_ "github.com/agentfs/agentfs/cache"         // depguard: cache-parts
	_ "github.com/agentfs/agentfs/cache/commit"  // depguard: cache-ns
	_ "github.com/agentfs/agentfs/cache/data"    // depguard: cache-ns
	_ "github.com/agentfs/agentfs/cache/meta"    // depguard: -
	_ "github.com/agentfs/agentfs/fs/changefeed" // depguard: cache cache-ns
	_ "github.com/agentfs/agentfs/overlay"       // depguard: cache cache-ns
	_ "github.com/agentfs/agentfs/serve/client"  // depguard: below-serve cache-ns
	_ "github.com/agentfs/agentfs/snapshot"      // depguard: -
)
