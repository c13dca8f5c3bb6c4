package main

import "github.com/agentfs/agentfs/internal/mountexec"

// On an agentfs mount, `agentfs exec` (and `agentfs run`) sync the mount
// after the command and list its changes from the volume's history.
func init() { execMountSeams = mountexec.Seams }
