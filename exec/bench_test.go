package exec

import (
	"context"
	"testing"
)

// BenchmarkExec measures the per-command latency of each backend: Exec of
// `true` (argv, no shell) with the default change list over an empty
// workspace, and with change tracking off.
func BenchmarkExec(b *testing.B) {
	for _, kind := range []string{"local", "docker"} {
		for _, tc := range []struct {
			name string
			opts Options
		}{
			{"walk", Options{}},
			{"nochanges", Options{ChangeTracker: NoChanges{}}},
		} {
			b.Run(kind+"/"+tc.name, func(b *testing.B) {
				var be *Backend
				if kind == "local" {
					var err error
					be, err = NewLocal(b.TempDir(), tc.opts)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = be.Close() })
				} else {
					be = newDockerBackend(b, dockerWorkspace(b), DockerOptions{Options: tc.opts})
				}
				ctx := context.Background()
				req := Request{Argv: []string{"true"}}
				for b.Loop() {
					res, err := be.Exec(ctx, req)
					if err != nil || res.ExitCode != 0 {
						b.Fatalf("%+v %v", res, err)
					}
				}
			})
		}
	}
}

// BenchmarkDockerStart measures starting a docker backend (container
// create and start) and closing it (container removal).
func BenchmarkDockerStart(b *testing.B) {
	dir := dockerWorkspace(b)
	newDockerBackend(b, dir, DockerOptions{}) // reports a missing engine
	for b.Loop() {
		be, err := NewDocker(context.Background(), dir, DockerOptions{Image: testImage(), User: testUser})
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
