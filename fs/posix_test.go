package fs_test

import (
	"testing"

	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/posixtest"
)

// posixExclusions are the checks an agentfs mount does not pass, with the
// reason. Keep it empty unless the engine cannot do something.
var posixExclusions = map[string]string{}

// TestPOSIXFile runs the POSIX suite over a mount of a file:// store.
func TestPOSIXFile(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	posixtest.Run(t, m.Dir, posixtest.Options{Exclude: posixExclusions})
}
