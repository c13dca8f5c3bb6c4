package exec

import "testing"

// What the external test package (the conformance suite's runs, which
// import exec/exectest, itself an importer of exec) needs of the internals.

// ProcAlive reports whether pid is a live (not zombie) process of this
// host.
func ProcAlive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// NewTestDocker starts a docker backend over dir with the test image and
// user (see newDockerBackend).
func NewTestDocker(t testing.TB, dir string, opts DockerOptions) *Backend {
	return newDockerBackend(t, dir, opts)
}

// DockerWorkspace returns a fresh workspace directory for the docker
// backend (see dockerWorkspace).
func DockerWorkspace(t testing.TB) string { return dockerWorkspace(t) }

// MarkPaths lists the paths a WalkTracker mark holds.
func MarkPaths(m Mark) []string {
	var ps []string
	for p := range m.(*walkMark).entries {
		ps = append(ps, p)
	}
	return ps
}
