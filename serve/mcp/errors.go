package mcp

import (
	"fmt"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/serve/apierr"
)

// errNoHistory: a history tool (snapshots, diff, commit, discard) was
// called on a workspace that is a plain directory, not an agentfs mount
// (code unavailable).
var errNoHistory = fmt.Errorf("this workspace is a plain directory without snapshots or history: %w", control.ErrNotMount)

// toolError classifies err for the client with the API's one error table
// (serve/apierr); path is the path the call named ("" for none). The
// client sees a tool error whose text is "CODE: MESSAGE" and whose
// structured content is {"error": *apierr.Error}, the HTTP API's error
// body.
func toolError(err error, path string) *apierr.Error { return apierr.From(err, path) }
