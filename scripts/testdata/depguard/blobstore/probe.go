// A depguard probe (scripts/depguard-probes.sh): each import names the
// rules of .golangci.yml that must deny it; one without a name must pass.
package probe

import (
	_ "github.com/agentfs/agentfs/internal/errcode"      // depguard: below-errcode
	_ "github.com/agentfs/agentfs/internal/histdiff"     // depguard: below-snapshot
	_ "github.com/agentfs/agentfs/internal/mountexec"    // depguard: below-exec
	_ "github.com/agentfs/agentfs/internal/mountproc"    // depguard: below-fs
	_ "github.com/agentfs/agentfs/internal/snapshottest" // depguard: below-cache
	_ "github.com/agentfs/agentfs/internal/volkey"       // depguard: below-snapshot
	_ "github.com/agentfs/agentfs/serve"                 // depguard: below-serve
	_ "github.com/agentfs/agentfs/snapshot"              // depguard: blobstore
)
