package mountd

import (
	"context"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/snapshot"
)

// The history side of a served mount: the control server's History
// requests, answered with the mount's open volume (its credentials
// included, which a client of the socket may not have).

var _ control.History = (*backend)(nil)

// Checkpoint commits everything written before and returns the covering
// commit.
func (m *backend) Checkpoint(ctx context.Context, message string) (snapshot.CommitID, error) {
	return m.vol.Commit(ctx, "checkpoint", message)
}

// SaveSnapshot names the commit that covers everything written before.
func (m *backend) SaveSnapshot(ctx context.Context, name, message string) (snapshot.Snapshot, error) {
	return m.vol.SaveSnapshot(ctx, name, message)
}

// Restore moves the live mount to ref's tree (the kernel is told through
// the volume's notifier, the FUSE server).
func (m *backend) Restore(ctx context.Context, ref, message string) (snapshot.RestoreResult, error) {
	return m.vol.Restore(ctx, ref, message)
}

// Repo is the mount's open volume.
func (m *backend) Repo() *snapshot.Repo { return m.vol.Repo() }
