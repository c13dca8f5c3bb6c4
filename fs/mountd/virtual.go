package mountd

// The virtual side of a served mount: the workspace's diff, commit and
// discard (control.VirtualBackend).

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

var _ control.VirtualBackend = (*backend)(nil)

// Diff lists the workspace's changes (control.VirtualBackend), with line
// counts and unified diffs of files when asked.
func (m *backend) Diff(ctx context.Context, req control.VirtualDiffRequest) (control.VirtualDiffReply, error) {
	var rep control.VirtualDiffReply
	if m.ws == nil {
		return rep, control.ErrNotVirtual
	}
	changes, err := m.ws.Diff(ctx)
	if err != nil {
		return rep, err
	}
	vb, err := m.ws.Base(ctx)
	if err != nil {
		return rep, err
	}
	rep.Base = overlay.DescribeBase(&vb)
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = control.DefaultMaxBytes
	}
	for _, c := range changes {
		if !selectedPath(c.Path, req.Paths) && (c.From == "" || !selectedPath(c.From, req.Paths)) {
			continue
		}
		fc := control.FileChange{Change: c}
		if (req.Stat || req.Patch) && c.Type == snapshot.TypeFile {
			p, err := m.ws.Patch(ctx, c, maxBytes, req.Patch)
			if err != nil {
				return rep, fmt.Errorf("diff %s: %w", c.Path, err)
			}
			fc.Patch = &p
		}
		rep.Changes = append(rep.Changes, fc)
	}
	return rep, nil
}

// Commit accepts the workspace's changes (control.VirtualBackend).
func (m *backend) Commit(ctx context.Context, req control.CommitRequest) (overlay.CommitResult, error) {
	if m.ws == nil {
		return overlay.CommitResult{}, control.ErrNotVirtual
	}
	if req.Snapshot != "" {
		if err := snapshot.ValidateName("snapshot", req.Snapshot); err != nil {
			return overlay.CommitResult{}, err
		}
	}
	return m.ws.Commit(ctx, req.Paths, req.Message, req.Snapshot, req.Force)
}

// Discard drops the workspace's changes (control.VirtualBackend).
func (m *backend) Discard(ctx context.Context, req control.DiscardRequest) (control.DiscardReply, error) {
	var rep control.DiscardReply
	if m.ws == nil {
		return rep, control.ErrNotVirtual
	}
	dropped, err := m.ws.Discard(ctx, req.Paths)
	if err != nil {
		return rep, err
	}
	rep.Discarded = dropped
	left, err := m.ws.Diff(ctx)
	rep.Pending = len(left)
	return rep, err
}

// selectedPath reports whether p is one of paths or lies below one (no
// paths select everything).
func selectedPath(p string, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	for _, s := range paths {
		if s == "" || p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}
