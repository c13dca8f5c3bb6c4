package exec

import "testing"

// RunSuiteIn runs the conformance suite (testBackend) for the backend kind
// "local" or "docker" over workspaces made by newDir, whose Options prepare
// completes (the seams of the filesystem beneath). It exists for the
// external test package, which runs the suite over an agentfs mount with
// packages that themselves import exec.
func RunSuiteIn(t *testing.T, kind string, newDir func(t *testing.T) string, prepare func(t *testing.T, dir string, opts *Options)) {
	base := localFixture()
	if kind == "docker" {
		base = dockerFixture()
	}
	testBackend(t, fixture{
		alive: base.alive,
		new: func(t *testing.T, opts Options) (*Backend, string) {
			dir := newDir(t)
			prepare(t, dir, &opts)
			if kind == "docker" {
				return newDockerBackend(t, dir, DockerOptions{Options: opts}), dir
			}
			b, err := NewLocal(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			return b, dir
		},
	})
}
