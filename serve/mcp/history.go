package mcp

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

// The history tools: snapshot_save, snapshot_list, snapshot_restore, diff,
// commit, discard. They talk to the workspace's mount server.

// control returns the call's control client, or errNoHistory.
func (c *call) control() (*control.Client, error) {
	if c.Control == nil {
		return nil, errNoHistory
	}
	return c.Control, nil
}

// Snapshot describes a saved snapshot.
type Snapshot struct {
	Name string `json:"name"`
	// Commit is the commit the snapshot names, as BRANCH@SEQ.
	Commit  string    `json:"commit"`
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // manual, or auto (saved by a restore)
	Message string    `json:"message,omitempty"`
}

func snapshotOf(s snapshot.Snapshot) Snapshot {
	return Snapshot{Name: s.Name, Commit: s.Commit.String(), Time: s.Time.UTC(), Kind: s.Kind, Message: s.Message}
}

// SnapshotSaveInput are snapshot_save's arguments.
type SnapshotSaveInput struct {
	Name    string `json:"name" jsonschema:"name of the new snapshot: letters, digits, '.', '-' and '_'; unique in the volume"`
	Message string `json:"message,omitempty" jsonschema:"what the snapshot is, for people reading snapshot_list"`
}

var snapshotSaveTool = &sdk.Tool{
	Name:  "snapshot_save",
	Title: "Save a snapshot",
	Description: `Save the workspace's current state (everything written so far) as a named snapshot: a cheap, immutable copy to compare against with diff or to go back to with snapshot_restore.
Errors: exists (a snapshot of that name exists), invalid_argument (bad name), unavailable (the workspace is a plain directory without history).`,
	InputSchema: inputSchema[SnapshotSaveInput](nil),
	Annotations: additive,
}

func snapshotSave(ctx context.Context, c *call, in SnapshotSaveInput) (Snapshot, error) {
	cl, err := c.control()
	if err != nil {
		return Snapshot{}, err
	}
	s, err := cl.SaveSnapshot(ctx, in.Name, in.Message)
	if err != nil {
		return Snapshot{}, fmt.Errorf("save snapshot %q: %w", in.Name, err)
	}
	return snapshotOf(s), nil
}

// SnapshotListInput are snapshot_list's arguments: none.
type SnapshotListInput struct{}

// SnapshotListOutput is snapshot_list's result.
type SnapshotListOutput struct {
	Snapshots []Snapshot `json:"snapshots"`
}

var snapshotListTool = &sdk.Tool{
	Name:  "snapshot_list",
	Title: "List snapshots",
	Description: `List the snapshots of the workspace's volume, oldest first: name, commit, time, kind (manual, or auto: saved by snapshot_restore before it replaced the state) and message.
Errors: unavailable (the workspace is a plain directory without history).`,
	InputSchema: inputSchema[SnapshotListInput](nil),
	Annotations: readOnly,
}

func snapshotList(ctx context.Context, c *call, _ SnapshotListInput) (SnapshotListOutput, error) {
	cl, err := c.control()
	if err != nil {
		return SnapshotListOutput{}, err
	}
	infos, err := cl.ListSnapshots(ctx, false)
	if err != nil {
		return SnapshotListOutput{}, fmt.Errorf("list snapshots: %w", err)
	}
	out := SnapshotListOutput{Snapshots: make([]Snapshot, 0, len(infos))}
	for _, s := range infos {
		out.Snapshots = append(out.Snapshots, snapshotOf(s.Snapshot))
	}
	return out, nil
}

// SnapshotRestoreInput are snapshot_restore's arguments.
type SnapshotRestoreInput struct {
	Name    string `json:"name" jsonschema:"snapshot to restore"`
	Message string `json:"message,omitempty" jsonschema:"why, recorded in the history"`
}

// SnapshotRestoreOutput is snapshot_restore's result.
type SnapshotRestoreOutput struct {
	Restored string `json:"restored"`
	// Commit is the workspace's new head commit.
	Commit string `json:"commit"`
	// SavedAs is the automatic snapshot holding the state the restore
	// replaced ("" when there was none).
	SavedAs string `json:"saved_as,omitempty"`
}

var snapshotRestoreTool = &sdk.Tool{
	Name:  "snapshot_restore",
	Title: "Restore a snapshot",
	Description: `Make the workspace's files what they were in a snapshot, in place. Nothing is lost: the state it replaces is saved first as an automatic snapshot, named in saved_as. Background jobs keep running and see the restored files.
Errors: not_found (no such snapshot), unavailable (the workspace is a plain directory without history).`,
	InputSchema: inputSchema[SnapshotRestoreInput](nil),
	Annotations: destructive,
}

func snapshotRestore(ctx context.Context, c *call, in SnapshotRestoreInput) (SnapshotRestoreOutput, error) {
	cl, err := c.control()
	if err != nil {
		return SnapshotRestoreOutput{}, err
	}
	res, err := cl.Restore(ctx, in.Name, in.Message)
	if err != nil {
		return SnapshotRestoreOutput{}, fmt.Errorf("restore snapshot %q: %w", in.Name, err)
	}
	out := SnapshotRestoreOutput{Restored: in.Name, Commit: res.Commit.ID.String()}
	if res.Saved != nil {
		out.SavedAs = res.Saved.Name
	}
	return out, nil
}

// Change is one path that differs.
type Change struct {
	// Op is added, modified, deleted or renamed.
	Op   string `json:"op"`
	Path string `json:"path"`
	// From is a renamed entry's path before (virtual workspaces only).
	From string `json:"from,omitempty"`
	// Type is file, dir, symlink or other.
	Type    string `json:"type"`
	Size    uint64 `json:"size"`
	OldSize uint64 `json:"old_size"`
	// Patch is the unified diff of a text file, when asked for.
	Patch string `json:"patch,omitempty"`
}

var opNames = map[overlay.ChangeOp]string{overlay.Added: "added", overlay.Modified: "modified", overlay.Deleted: "deleted", overlay.Renamed: "renamed"}

func changeOf(c overlay.Change) Change {
	out := Change{Op: opNames[c.Op], Path: c.Path, From: c.From, Type: c.Type.String(), Size: c.Size, OldSize: c.OldSize}
	switch c.Op {
	case overlay.Added:
		out.OldSize = 0
	case overlay.Deleted:
		out.Size, out.OldSize = 0, c.Size
	}
	return out
}

func changesOf(cs []overlay.Change) []Change {
	out := make([]Change, 0, len(cs))
	for _, c := range cs {
		out = append(out, changeOf(c))
	}
	return out
}

// DiffInput are diff's arguments.
type DiffInput struct {
	From  string   `json:"from,omitempty" jsonschema:"snapshot to compare the current files with; required unless the workspace is virtual (default for a virtual workspace: its base)"`
	Paths []string `json:"paths,omitempty" jsonschema:"only these paths and what lies below them, relative to the workspace root (default: everything)"`
	Patch bool     `json:"patch,omitempty" jsonschema:"include the unified diff of each changed text file (default false)"`
}

// DiffOutput is diff's result.
type DiffOutput struct {
	// Base is what the changes are relative to.
	Base    string   `json:"base"`
	Changes []Change `json:"changes"`
}

var diffTool = &sdk.Tool{
	Name:  "diff",
	Title: "Show changes",
	Description: `List what changed in the workspace, sorted by path: relative to a snapshot (from), or, in a virtual (copy-on-write) workspace, relative to its base. Each change has op (added, modified, deleted, renamed), path, type and sizes; with patch, the unified diff of text files.
Errors: not_found (no such snapshot), invalid_argument (from missing in a workspace that is not virtual), unavailable (plain directory).`,
	InputSchema: inputSchema[DiffInput](map[string]any{"patch": false}),
	Annotations: readOnly,
}

func diff(ctx context.Context, c *call, in DiffInput) (DiffOutput, error) {
	cl, err := c.control()
	if err != nil {
		return DiffOutput{}, err
	}
	info, err := cl.Info(ctx)
	if err != nil {
		return DiffOutput{}, err
	}
	if in.From == "" {
		if info.Virtual == nil {
			return DiffOutput{}, fmt.Errorf("diff: %w: this workspace is not virtual: name the snapshot to compare with in from (snapshot_list lists them)", exec.ErrInvalid)
		}
		rep, err := cl.VirtualDiff(ctx, control.VirtualDiffRequest{Paths: in.Paths, Patch: in.Patch})
		if err != nil {
			return DiffOutput{}, fmt.Errorf("diff: %w", err)
		}
		out := DiffOutput{Base: rep.Base, Changes: make([]Change, 0, len(rep.Changes))}
		for _, fc := range rep.Changes {
			ch := changeOf(fc.Change)
			if fc.Patch != nil {
				ch.Patch = fc.Patch.Text
			}
			out.Changes = append(out.Changes, ch)
		}
		return out, nil
	}
	out := DiffOutput{Base: in.From, Changes: []Change{}}
	_, err = cl.Diff(ctx, control.DiffRequest{A: in.From, B: "live", Patch: in.Patch}, func(hc histdiff.Change) error {
		if hc.Path == "." || !selected(hc.Path, in.Paths) {
			return nil
		}
		out.Changes = append(out.Changes, Change{Op: hc.Op, Path: hc.Path, Type: hc.Type,
			Size: hc.NewSize, OldSize: hc.OldSize, Patch: hc.Patch})
		return nil
	})
	if err != nil {
		return DiffOutput{}, fmt.Errorf("diff from %q: %w", in.From, err)
	}
	return out, nil
}

// selected reports whether p is one of paths or below one (every p when
// paths is empty).
func selected(p string, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	for _, s := range paths {
		if s == "" || s == "." || s == p || within(p, s) {
			return true
		}
	}
	return false
}

func within(p, dir string) bool {
	return len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// CommitInput are commit's arguments.
type CommitInput struct {
	Paths    []string `json:"paths,omitempty" jsonschema:"commit only the changes to these paths and below them (default: all)"`
	Message  string   `json:"message,omitempty" jsonschema:"commit message"`
	Snapshot string   `json:"snapshot,omitempty" jsonschema:"also name the new commit as a snapshot (workspaces over a snapshot or branch only)"`
	Force    bool     `json:"force,omitempty" jsonschema:"commit even where the base changed the same paths since the workspace was made (default false)"`
}

// CommitOutput is commit's result.
type CommitOutput struct {
	// Commit is the base branch's new commit (workspaces over a snapshot
	// or branch; "" for a host directory).
	Commit  string   `json:"commit,omitempty"`
	Changes []Change `json:"changes"`
	// Pending counts the changes left uncommitted.
	Pending int `json:"pending"`
}

var commitTool = &sdk.Tool{
	Name:  "commit",
	Title: "Commit changes to the base",
	Description: `In a virtual (copy-on-write) workspace, write its changes (or those under paths) to its base: the host directory it is over, or a new commit of the branch it was made from. Committed changes stop being changes.
Errors: invalid_argument (the workspace is not virtual, or a path's parent directory is new: commit the parent too), conflict (the base changed the same paths: diff, then commit with force), unavailable (plain directory).`,
	InputSchema: inputSchema[CommitInput](map[string]any{"force": false}),
	Annotations: destructive,
}

func commit(ctx context.Context, c *call, in CommitInput) (CommitOutput, error) {
	cl, err := c.control()
	if err != nil {
		return CommitOutput{}, err
	}
	res, err := cl.Commit(ctx, control.CommitRequest{Paths: in.Paths, Message: in.Message, Snapshot: in.Snapshot, Force: in.Force})
	if err != nil {
		return CommitOutput{}, fmt.Errorf("commit: %w", err)
	}
	out := CommitOutput{Changes: changesOf(res.Changes), Pending: res.Pending}
	if res.Commit != nil {
		out.Commit = res.Commit.String()
	}
	return out, nil
}

// DiscardInput are discard's arguments.
type DiscardInput struct {
	Paths []string `json:"paths,omitempty" jsonschema:"drop only the changes to these paths and below them (default: all)"`
}

// DiscardOutput is discard's result.
type DiscardOutput struct {
	Discarded []Change `json:"discarded"`
	// Pending counts the changes left.
	Pending int `json:"pending"`
}

var discardTool = &sdk.Tool{
	Name:  "discard",
	Title: "Discard changes",
	Description: `In a virtual (copy-on-write) workspace, drop its changes (or those under paths): those paths show the base's content again at once. Dropped changes cannot be recovered.
Errors: invalid_argument (the workspace is not virtual), unavailable (plain directory).`,
	InputSchema: inputSchema[DiscardInput](nil),
	Annotations: destructive,
}

func discard(ctx context.Context, c *call, in DiscardInput) (DiscardOutput, error) {
	cl, err := c.control()
	if err != nil {
		return DiscardOutput{}, err
	}
	rep, err := cl.Discard(ctx, control.DiscardRequest{Paths: in.Paths})
	if err != nil {
		return DiscardOutput{}, fmt.Errorf("discard: %w", err)
	}
	return DiscardOutput{Discarded: changesOf(rep.Discarded), Pending: rep.Pending}, nil
}

func addHistoryTools(s *sdk.Server, ws source) {
	addTool(s, ws, snapshotSaveTool, snapshotSave)
	addTool(s, ws, snapshotListTool, snapshotList)
	addTool(s, ws, snapshotRestoreTool, snapshotRestore)
	addTool(s, ws, diffTool, diff)
	addTool(s, ws, commitTool, commit)
	addTool(s, ws, discardTool, discard)
}
