package exec

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/testenv"
)

func TestSpecValidate(t *testing.T) {
	for _, c := range []struct {
		s  Spec
		ok bool
	}{
		{Spec{}, true},
		{Spec{Type: TypeLocal}, true},
		{Spec{Type: TypeDocker, Image: "img"}, true},
		{Spec{Type: TypeDocker, Image: "img", User: "1000:1000", Network: true, Memory: 1 << 30, CPUs: 1.5, Pids: 100}, true},
		{Spec{Type: "vm"}, false},
		{Spec{Type: TypeLocal, Image: "img"}, false},
		{Spec{Network: true}, false},
		{Spec{Type: TypeDocker}, false},
		{Spec{Type: TypeDocker, Image: "img", User: "root"}, false},
		{Spec{Type: TypeDocker, Image: "img", Memory: -1}, false},
		{Spec{Type: TypeDocker, Image: "img", Pids: -1}, false},
	} {
		err := c.s.Validate()
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ok=%v (ErrInvalid otherwise)", c.s, err, c.ok)
		}
	}
	if uid, gid, ok := (Spec{User: "12:34"}).UID(); !ok || uid != 12 || gid != 34 {
		t.Errorf("UID(12:34) = %d, %d, %v", uid, gid, ok)
	}
	if _, _, ok := (Spec{}).UID(); ok {
		t.Error("UID of no user: ok")
	}
}

// TestSpecNewAndRemoveContainers starts a docker backend from a Spec with
// labels, and RemoveContainers removes its container by those labels (as
// a restarted controller does after a kill -9), leaving other containers.
func TestSpecNewAndRemoveContainers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec := Spec{Type: TypeDocker, Image: testImage(), User: testUser}
	labels := map[string]string{"agentfs.test.owner": t.Name()}
	b, err := spec.New(ctx, dockerWorkspace(t), Options{}, labels)
	if errors.Is(err, ErrDockerUnavailable) || errors.Is(err, ErrImageMissing) {
		testenv.Missing(t, "docker engine with image "+spec.Image+" (bash scripts/setup-docker.sh)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	other := newDockerBackend(t, dockerWorkspace(t), DockerOptions{Labels: map[string]string{"agentfs.test.owner": "someone else"}})
	if res, err := b.Exec(ctx, Request{Command: "id -u"}); err != nil || string(res.Stdout) != "1000\n" {
		t.Fatalf("id -u: %v %+v", err, res)
	}
	n, err := RemoveContainers(ctx, labels)
	if err != nil || n != 1 {
		t.Fatalf("RemoveContainers = %d, %v; want 1, nil", n, err)
	}
	if res, err := b.Exec(ctx, Request{Command: "true"}); err == nil && res.ExitCode == 0 {
		t.Error("a command ran in a removed container")
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close after RemoveContainers: %v", err)
	}
	if res, err := other.Exec(ctx, Request{Command: "true"}); err != nil || res.ExitCode != 0 {
		t.Errorf("the other container: %v %+v", err, res)
	}
}
