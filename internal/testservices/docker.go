package testservices

import (
	"context"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// DockerContainers returns the ids of the containers, running or not, that
// carry label ("key=value"), sorted. It fails t when the Docker engine
// does not answer: tests call it after they have used the engine.
func DockerContainers(t testing.TB, label string) []string {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{
		All: true, Filters: filters.NewArgs(filters.Arg("label", label)),
	})
	if err != nil {
		t.Fatalf("list the containers labelled %s: %v", label, err)
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	return ids
}
