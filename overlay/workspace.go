package overlay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/snapshot"
)

var errNotFound = cache.ErrNotFound

// Errors of this package; check them with errors.Is.
var (
	// ErrNotVirtual: the volume or branch is not a virtual workspace.
	ErrNotVirtual = errors.New("not a virtual workspace")
	// ErrBaseMismatch: a workspace exists with another base.
	ErrBaseMismatch = errors.New("workspace exists with another base")
	// ErrConflict: the base changed the same paths since the workspace
	// started; nothing was committed.
	ErrConflict = errors.New("the base changed the same paths")
	// ErrNeedParent: a path to commit lies in a directory that is new or
	// renamed in the workspace and was not selected too; nothing was
	// committed.
	ErrNeedParent = errors.New("its directory is new or renamed in the workspace")
	// ErrEntangled: a path to commit changes a host entry that a pending
	// change still reads (a renamed entry's source, a hard link's file);
	// nothing was committed.
	ErrEntangled = errors.New("pending changes read what it changes in the host directory")
)

// Base is what a virtual workspace's changes are relative to: a commit
// (Ref: a snapshot name, or branch[@seq] as snapshot.Repo.Resolve takes
// them), or a directory on this host. The zero Base is the head of the
// default branch.
type Base struct {
	Ref     string
	HostDir string
}

func (b Base) String() string {
	if b.HostDir != "" {
		return b.HostDir
	}
	if b.Ref == "" {
		return snapshot.DefaultBranch
	}
	return b.Ref
}

// BranchName returns the branch that holds the workspace called name.
func BranchName(name string) string { return "virtual-" + name }

// Prepare creates the branch of workspace name over base, or checks that
// an existing one has that base (a zero Base accepts any), and returns the
// branch to mount, with the host directory to read through to (nil for a
// commit base). Creating it costs one commit, whatever the base's size.
func Prepare(ctx context.Context, repo *snapshot.Repo, name string, base Base, host string, now time.Time) (string, *HostDir, error) {
	branch := BranchName(name)
	if err := snapshot.ValidateName("workspace", branch); err != nil {
		return "", nil, err
	}
	head, err := repo.Head(ctx, branch)
	switch {
	case err == nil:
		vb := head.Virtual
		if vb == nil {
			return "", nil, fmt.Errorf("branch %s: %w", branch, ErrNotVirtual)
		}
		if vb.HostDir != "" {
			if base.Ref != "" || (base.HostDir != "" && !sameDir(base.HostDir, vb.HostDir)) {
				return "", nil, fmt.Errorf("workspace %s is over %s: mount it without --base, or choose another --name: %w", name, vb.HostDir, ErrBaseMismatch)
			}
			if vb.Host != "" && vb.Host != host {
				return "", nil, fmt.Errorf("workspace %s is over a directory of host %s, not this one (%s): %w", name, vb.Host, host, ErrBaseMismatch)
			}
			hd, err := OpenHostDir(vb.HostDir)
			return branch, hd, err
		}
		if base.HostDir != "" {
			return "", nil, fmt.Errorf("workspace %s is over %s: mount it without --base, or choose another --name: %w", name, DescribeBase(vb), ErrBaseMismatch)
		}
		if base.Ref != "" {
			if err := sameCommitBase(ctx, repo, base.Ref, vb); err != nil {
				return "", nil, err
			}
		}
		return branch, nil, nil
	case !errors.Is(err, snapshot.ErrNoCommits):
		return "", nil, err
	}
	c := snapshot.Commit{ID: snapshot.CommitID{Branch: branch, Seq: 1}, Time: now.UTC(), Kind: "virtual", Host: host,
		Message: "virtual workspace " + name + " over " + base.String()}
	var hd *HostDir
	if base.HostDir != "" {
		if hd, err = OpenHostDir(base.HostDir); err != nil {
			return "", nil, err
		}
		st, err := hd.Stat(ctx, "")
		if err != nil {
			_ = hd.Close()
			return "", nil, err
		}
		c.Root = snapshot.RootDir{Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Atime: st.Atime, Mtime: st.Mtime, Ctime: st.Ctime,
			Nlink: max(st.Nlink, 2), Xattrs: st.Xattrs, HasOrigin: true}
		c.Virtual = &snapshot.VirtualBase{HostDir: hd.Root(), Host: host, Since: now.UTC()}
	} else {
		ref := base.Ref
		if ref == "" {
			ref = snapshot.DefaultBranch
		}
		src, err := repo.Resolve(ctx, ref)
		if err != nil {
			return "", nil, fmt.Errorf("base %s: %w", ref, err)
		}
		cid := src.Commit
		c.Root, c.Links, c.Parent = src.Tree.Root, src.Tree.Links, &cid
		c.Virtual = &snapshot.VirtualBase{Commit: &cid, Snapshot: src.Snapshot}
	}
	if err := repo.WriteCommit(ctx, c); err != nil {
		if hd != nil {
			_ = hd.Close()
		}
		if errors.Is(err, snapshot.ErrCommitExists) {
			return Prepare(ctx, repo, name, base, host, now) // created meanwhile
		}
		return "", nil, err
	}
	// The workspace shares the base's objects: if gc removed the base
	// commit meanwhile, they may be gone.
	if c.Parent != nil {
		if _, err := repo.ReadCommit(ctx, *c.Parent); errors.Is(err, snapshot.ErrMissing) {
			return "", nil, fmt.Errorf("base %s was removed while the workspace was created: %w", base, snapshot.ErrSourceGone)
		}
	}
	return branch, hd, nil
}

// sameCommitBase checks that ref names the base of an existing workspace
// over vb: the commit it is over now, the snapshot it was made from, or
// (for a branch base, or once a commit moved its base) the same branch.
func sameCommitBase(ctx context.Context, repo *snapshot.Repo, ref string, vb *snapshot.VirtualBase) error {
	src, err := repo.Resolve(ctx, ref)
	if err != nil {
		return fmt.Errorf("base %s: %w", ref, err)
	}
	ok := src.Commit.Branch == vb.Commit.Branch && vb.Snapshot == ""
	if src.Snapshot != "" {
		ok = src.Snapshot == vb.Snapshot
	}
	ok = ok || src.Commit == *vb.Commit
	if !ok {
		return fmt.Errorf("it is over %s, not %s: mount it without --base, or choose another --name: %w", DescribeBase(vb), src, ErrBaseMismatch)
	}
	return nil
}

// DescribeBase names a workspace's base for people: its host directory,
// "snapshot NAME (BRANCH@SEQ)", or "BRANCH@SEQ".
func DescribeBase(vb *snapshot.VirtualBase) string {
	switch {
	case vb.HostDir != "":
		return vb.HostDir
	case vb.Snapshot != "":
		return fmt.Sprintf("snapshot %s (%v)", vb.Snapshot, vb.Commit)
	case vb.Commit != nil:
		return vb.Commit.String()
	}
	return "nothing"
}

func sameDir(a, b string) bool {
	ha, err1 := OpenHostDir(a)
	if err1 != nil {
		return false
	}
	defer func() { _ = ha.Close() }()
	return ha.Root() == b
}

// Workspace is a mounted virtual workspace: a volume on its workspace
// branch, and its base. Its methods are safe for concurrent use (the
// volume serializes them).
type Workspace struct {
	vol  *cache.Volume
	repo *snapshot.Repo
	host *HostDir // nil for a commit base
}

// NewWorkspace wraps an opened volume of a workspace branch. For a host
// base, host is Prepare's host directory, the one the volume was opened
// with as its Options.Lower; for a commit base it is nil. A host directory
// other than the one the branch records (or none for a host base) is
// ErrNotVirtual: applying the workspace writes into that directory.
func NewWorkspace(ctx context.Context, vol *cache.Volume, host *HostDir) (*Workspace, error) {
	head, err := vol.Head(ctx)
	if err != nil {
		return nil, err
	}
	if head.Virtual == nil {
		return nil, fmt.Errorf("branch %s: %w", head.ID.Branch, ErrNotVirtual)
	}
	w := &Workspace{vol: vol, repo: vol.Repo()}
	if head.Virtual.HostDir != "" {
		if host == nil {
			return nil, fmt.Errorf("workspace over %s opened without its host directory: %w", head.Virtual.HostDir, ErrNotVirtual)
		}
		if host.Root() != head.Virtual.HostDir {
			return nil, fmt.Errorf("workspace over %s opened with the host directory %s: %w", head.Virtual.HostDir, host.Root(), ErrNotVirtual)
		}
		w.host = host
	}
	return w, nil
}

// Base returns the workspace's base as its commits record it.
func (w *Workspace) Base(ctx context.Context) (snapshot.VirtualBase, error) {
	head, err := w.vol.Head(ctx)
	if err != nil {
		return snapshot.VirtualBase{}, err
	}
	if head.Virtual == nil {
		return snapshot.VirtualBase{}, ErrNotVirtual
	}
	return *head.Virtual, nil
}

// ChangeOp is the kind of a change.
type ChangeOp byte

// Kinds of changes.
const (
	Added    ChangeOp = 'A'
	Modified ChangeOp = 'M'
	Deleted  ChangeOp = 'D'
	Renamed  ChangeOp = 'R' // Path now holds what was at From
)

// Change is one path that differs from the base.
type Change struct {
	Op   ChangeOp `json:"op"`
	Path string   `json:"path"`
	// From is the path in the base when it differs from Path: a rename's
	// source, or the base path of an entry inside a renamed directory
	// (host directory bases only).
	From string `json:"from,omitempty"`
	// Edited: a renamed entry was changed too (its content or attributes).
	Edited bool               `json:"edited,omitempty"`
	Type   snapshot.EntryType `json:"type"`
	// Size after the change (before it, for deletions); OldSize before it.
	Size    uint64 `json:"size"`
	OldSize uint64 `json:"old_size"`
}

func (c Change) String() string {
	if c.Op == Renamed {
		return fmt.Sprintf("%c %s -> %s", c.Op, c.From, c.Path)
	}
	return fmt.Sprintf("%c %s", c.Op, c.Path)
}

// Diff commits what was written (so the comparison is with a consistent
// state) and returns the changes relative to the base, sorted by path. For
// a host base, an entry is compared with the host's current state.
func (w *Workspace) Diff(ctx context.Context) ([]Change, error) {
	out, _, err := w.diff(ctx)
	return out, err
}

// reader is a workspace entry that reads through to a host path other
// than its own: a renamed entry (and what is below it), or a new name of a
// base file (a hard link).
type reader struct{ live, origin string }

// diff is Diff, with the readers of a host base.
func (w *Workspace) diff(ctx context.Context) ([]Change, []reader, error) {
	id, err := w.vol.Commit(ctx, "sync", "")
	if err != nil {
		return nil, nil, err
	}
	live, err := w.repo.ReadCommit(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var out []Change
	var readers []reader
	if w.host != nil {
		out, readers, err = w.hostDiff(ctx, live)
	} else {
		out, err = w.commitDiff(ctx, live)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, readers, err
}

func (w *Workspace) commitDiff(ctx context.Context, live snapshot.Commit) ([]Change, error) {
	base, err := w.repo.ReadCommit(ctx, *live.Virtual.Commit)
	if err != nil {
		return nil, fmt.Errorf("base %v: %w", *live.Virtual.Commit, err)
	}
	// The tree diff reports an entry that changed between a directory and
	// something else as one modification, followed by what was below the
	// directory (deleted or added).
	var out []Change
	err = w.repo.Diff(ctx, snapshot.CommitTree(base), snapshot.CommitTree(live), func(c snapshot.Change) error {
		ch := Change{Op: ChangeOp(c.Op), Path: c.Path}
		if e := c.Entry(); e != nil {
			ch.Type = e.Type
		}
		ch.OldSize, ch.Size = c.Sizes()
		if c.Op == snapshot.Deleted {
			ch.Size = ch.OldSize
		}
		out = append(out, ch)
		return nil
	})
	return out, err
}

// basePath is where the entry a change concerns lies in the base: From
// when set, else Path.
func (c Change) basePath() string {
	if c.From != "" {
		return c.From
	}
	return c.Path
}

func sameHostAttrs(e, h snapshot.Entry) bool {
	return e.Mode == h.Mode && e.Uid == h.Uid && e.Gid == h.Gid &&
		slices.EqualFunc(e.Xattrs, h.Xattrs, func(a, b snapshot.Xattr) bool { return a.Name == b.Name && string(a.Value) == string(b.Value) })
}

// selected reports whether path is one of paths or below one ("" or no
// paths selects everything).
func selected(path string, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	for _, p := range paths {
		p = strings.Trim(p, "/")
		if p == "" || p == "." || path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// CommitResult reports what Commit did.
type CommitResult struct {
	// Commit is the new commit of the base branch (commit bases).
	Commit *snapshot.CommitID `json:"commit,omitempty"`
	// Changes are the changes committed (written to the host directory,
	// for a host base).
	Changes []Change `json:"changes"`
	// Pending counts the changes left in the workspace.
	Pending int `json:"pending"`
}

// Discard drops the workspace's changes to paths (all of them without
// paths): those paths show the base again, at once, without a remount.
func (w *Workspace) Discard(ctx context.Context, paths []string) ([]Change, error) {
	changes, err := w.Diff(ctx)
	if err != nil {
		return nil, err
	}
	var picked []Change
	for _, c := range changes {
		if selected(c.Path, paths) || (c.Op == Renamed && selected(c.From, paths)) {
			picked = append(picked, c)
		}
	}
	if len(picked) == 0 {
		return nil, nil
	}
	_, err = w.vol.Rewrite(ctx, "discard", func(head snapshot.Commit) (snapshot.Commit, error) {
		next := snapshot.Commit{Virtual: head.Virtual, Message: fmt.Sprintf("discard %d changes", len(picked))}
		if len(paths) == 0 {
			root, links, err := w.baseRoot(ctx, head)
			next.Root, next.Links = root, links
			return next, err
		}
		root, links, err := w.revert(ctx, head, discardTargets(picked, changes))
		next.Root, next.Links = root, links
		return next, err
	})
	if err != nil {
		return nil, err
	}
	return picked, nil
}

// baseRoot returns the root of the base itself.
func (w *Workspace) baseRoot(ctx context.Context, head snapshot.Commit) (snapshot.RootDir, *snapshot.BlobRef, error) {
	if w.host != nil {
		st, err := w.host.Stat(ctx, "")
		if err != nil {
			return snapshot.RootDir{}, nil, err
		}
		return snapshot.RootDir{Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Atime: st.Atime, Mtime: st.Mtime, Ctime: st.Ctime,
			Nlink: max(st.Nlink, 2), Xattrs: st.Xattrs, HasOrigin: true}, nil, nil
	}
	base, err := w.repo.ReadCommit(ctx, *head.Virtual.Commit)
	if err != nil {
		return snapshot.RootDir{}, nil, err
	}
	return base.Root, base.Links, nil
}

// revertTarget is one path to revert: the workspace's entry at Live takes
// the base's entry at Base again (or goes away if the base has none).
type revertTarget struct {
	Live, Base string
	Remove     bool // the entry goes, whatever the base has at Base
}

// discardTargets are the paths that undo changes: each change's path
// takes its base entry again, and a rename's source is restored where it
// lies now (below the renamed directories of all, the workspace's
// changes).
func discardTargets(picked, all []Change) []revertTarget {
	var dirs []Change // renamed directories: base path From is at Path now
	for _, c := range all {
		if c.Op == Renamed && c.Type == snapshot.TypeDir {
			dirs = append(dirs, c)
		}
	}
	// toLive maps a base path to where it lies in the workspace; toBase
	// the other way. The deepest renamed directory decides.
	move := func(p string, from, to func(Change) string) string {
		best := -1
		for i, d := range dirs {
			if f := from(d); strings.HasPrefix(p, f+"/") && (best < 0 || len(f) > len(from(dirs[best]))) {
				best = i
			}
		}
		if best < 0 {
			return p
		}
		return to(dirs[best]) + p[len(from(dirs[best])):]
	}
	path := func(c Change) string { return c.Path }
	from := func(c Change) string { return c.From }
	var out []revertTarget
	for _, c := range picked {
		if c.Op == Renamed {
			out = append(out, revertTarget{Live: c.Path, Base: move(c.Path, path, from)}, revertTarget{Live: move(c.From, from, path), Base: c.From})
			continue
		}
		// An addition goes (also where the base's entry was renamed away:
		// the rename still holds it).
		out = append(out, revertTarget{Live: c.Path, Base: c.basePath(), Remove: c.Op == Added})
	}
	return out
}

// commitTargets are the paths of committed changes to a host directory:
// each now reads through to the same host path (a rename's source to
// nothing).
func commitTargets(picked []Change) []revertTarget {
	var out []revertTarget
	for _, c := range picked {
		out = append(out, revertTarget{Live: c.Path, Base: c.Path})
		if c.Op == Renamed {
			out = append(out, revertTarget{Live: c.From, Base: c.From})
		}
	}
	return out
}

// revert returns head's tree with targets reverted: each Live path takes
// the base's entry at Base again, or goes away if the base has none.
// Shallow paths go first, and a path below one already reverted is left
// alone (the directory's revert covered it).
func (w *Workspace) revert(ctx context.Context, head snapshot.Commit, targets []revertTarget) (snapshot.RootDir, *snapshot.BlobRef, error) {
	links, err := w.repo.ReadLinkTable(ctx, head.Links)
	if err != nil {
		return snapshot.RootDir{}, nil, err
	}
	var baseTree snapshot.TreeRoot
	var baseLinks snapshot.LinkTable
	if w.host == nil {
		base, err := w.repo.ReadCommit(ctx, *head.Virtual.Commit)
		if err != nil {
			return snapshot.RootDir{}, nil, err
		}
		baseTree = snapshot.CommitTree(base)
		if baseLinks, err = w.repo.ReadLinkTable(ctx, base.Links); err != nil {
			return snapshot.RootDir{}, nil, err
		}
	}
	s := newSurgeon(w.repo, w.host, links, baseLinks)
	if w.host == nil {
		// A path put back inside a directory the workspace deleted gets
		// that directory again (with the base's attributes), holding only
		// what is put back.
		s.mkdir = func(ctx context.Context, p string) (snapshot.Entry, bool, error) {
			return w.baseEntry(ctx, baseTree, p)
		}
	}
	root := rootEntry(head.Root)
	sort.SliceStable(targets, func(i, j int) bool {
		return strings.Count(targets[i].Live, "/") < strings.Count(targets[j].Live, "/")
	})
	done := map[string]bool{}
	for _, t := range targets {
		if done[t.Live] || underAny(t.Live, done) {
			continue
		}
		done[t.Live] = true
		var e *snapshot.Entry
		if !t.Remove {
			be, ok, err := w.baseEntry(ctx, baseTree, t.Base)
			if err != nil {
				return snapshot.RootDir{}, nil, err
			}
			if ok {
				e = &be
			}
		}
		if root, err = s.replace(ctx, root, t.Live, e); err != nil {
			return snapshot.RootDir{}, nil, err
		}
	}
	lref, err := s.finish(ctx)
	if err != nil {
		return snapshot.RootDir{}, nil, err
	}
	return rootDir(root), lref, nil
}

func underAny(p string, dirs map[string]bool) bool {
	for d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// baseEntry returns the base's entry at path, if it has one.
func (w *Workspace) baseEntry(ctx context.Context, baseTree snapshot.TreeRoot, path string) (snapshot.Entry, bool, error) {
	if w.host != nil {
		e, err := w.host.Stat(ctx, path)
		if isNotFound(err) {
			return snapshot.Entry{}, false, nil
		}
		if err != nil {
			return snapshot.Entry{}, false, err
		}
		pristine(&e, path)
		return e, true, nil
	}
	e, err := w.repo.LookupPath(ctx, baseTree, path)
	if errors.Is(err, snapshot.ErrNoEntry) {
		return snapshot.Entry{}, false, nil
	}
	if err != nil {
		return snapshot.Entry{}, false, err
	}
	return e, true, nil
}

// Commit accepts the workspace's changes to paths (all without paths).
//
// Over a commit base, they become a new commit on the base's branch: the
// whole live tree when everything is committed and the branch has not
// moved, otherwise the changed paths applied to the branch's head — refused
// with ErrConflict if the branch changed any of them since the base (force
// overrides). The workspace's base then moves to the new commit.
//
// Over a host directory, each changed path is written to the directory:
// files atomically (a temporary file renamed over the old one), then the
// paths read through to the host again. A change to a path that the host
// changed since the workspace was created or last committed (or whose host
// entry is gone) is refused with ErrConflict, unless force: the workspace
// never overwrites or deletes the host's own changes unasked.
// snapshotName, if set, names the new base commit (commit bases only).
func (w *Workspace) Commit(ctx context.Context, paths []string, message, snapshotName string, force bool) (CommitResult, error) {
	changes, readers, err := w.diff(ctx)
	if err != nil {
		return CommitResult{}, err
	}
	var picked []Change
	for _, c := range changes {
		if selected(c.Path, paths) {
			picked = append(picked, c)
		}
	}
	res := CommitResult{Changes: picked, Pending: len(changes) - len(picked)}
	if len(picked) == 0 {
		return res, nil
	}
	if err := checkParents(picked, changes); err != nil {
		return CommitResult{Pending: len(changes)}, err
	}
	if err := checkReaders(picked, paths, readers); err != nil {
		return CommitResult{Pending: len(changes)}, err
	}
	if w.host != nil {
		vb, err := w.Base(ctx)
		if err != nil {
			return res, err
		}
		if !force {
			if err := w.hostConflicts(ctx, picked, vb.Since); err != nil {
				return CommitResult{Pending: len(changes)}, err
			}
		}
		if err := w.applyToHost(ctx, picked); err != nil {
			return res, err
		}
		since := time.Now().UTC()
		// The committed paths read through to the host again, and host
		// changes count from now on.
		_, err = w.vol.Rewrite(ctx, "commit", func(head snapshot.Commit) (snapshot.Commit, error) {
			nvb := *head.Virtual
			nvb.Since = since
			next := snapshot.Commit{Virtual: &nvb, Message: message}
			var err error
			if res.Pending == 0 {
				next.Root, next.Links, err = w.baseRoot(ctx, head)
			} else {
				next.Root, next.Links, err = w.revert(ctx, head, commitTargets(picked))
			}
			return next, err
		})
		return res, err
	}
	id, err := w.commitToBase(ctx, picked, len(paths) == 0, message, force)
	if err != nil {
		return res, err
	}
	res.Commit = &id
	if snapshotName != "" {
		if _, err := w.repo.SaveSnapshot(ctx, snapshotName, id, snapshot.SaveOptions{Message: message}); err != nil {
			return res, err
		}
	}
	return res, nil
}

// checkParents refuses to commit a path whose directory is new or renamed
// in the workspace unless that directory is committed too: the base has
// no place for it otherwise.
func checkParents(picked, all []Change) error {
	in := map[string]bool{}
	for _, c := range picked {
		in[c.Path] = true
	}
	for _, d := range all {
		if in[d.Path] || d.Type != snapshot.TypeDir || (d.Op != Added && d.Op != Renamed) {
			continue
		}
		for _, c := range picked {
			if strings.HasPrefix(c.Path, d.Path+"/") {
				what := "new"
				if d.Op == Renamed {
					what = "renamed from " + d.From
				}
				return fmt.Errorf("%s lies in %s/, %s in the workspace: commit %s as well: %w", c.Path, d.Path, what, d.Path, ErrNeedParent)
			}
		}
	}
	return nil
}

// checkReaders refuses a commit to a host directory that changes a host
// entry which a change left pending still reads through to: the pending
// change would see the host's new state (or nothing) instead of the base.
func checkReaders(picked []Change, paths []string, readers []reader) error {
	overlaps := func(a, b string) bool {
		return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
	}
	for _, r := range readers {
		if selected(r.live, paths) {
			continue // committed too
		}
		for _, c := range picked {
			for _, p := range []string{c.Path, c.basePath()} {
				if overlaps(p, r.origin) {
					return fmt.Errorf("%s reads %s of the host directory, which committing %s changes: commit %s as well, or discard it: %w",
						r.live, r.origin, c.Path, r.live, ErrEntangled)
				}
			}
		}
	}
	return nil
}

// commitToBase writes the changes as a commit of the base branch and moves
// the workspace's base to it.
func (w *Workspace) commitToBase(ctx context.Context, picked []Change, all bool, message string, force bool) (snapshot.CommitID, error) {
	var out snapshot.CommitID
	_, err := w.vol.Rewrite(ctx, "rebase", func(head snapshot.Commit) (snapshot.Commit, error) {
		vb := *head.Virtual
		branch := vb.Commit.Branch
		bseq, err := w.repo.HeadSeq(ctx, branch)
		if err != nil {
			return snapshot.Commit{}, fmt.Errorf("base branch %s: %w", branch, err)
		}
		bhead, err := w.repo.ReadCommit(ctx, snapshot.CommitID{Branch: branch, Seq: bseq})
		if err != nil {
			return snapshot.Commit{}, err
		}
		next := snapshot.Commit{ID: snapshot.CommitID{Branch: branch, Seq: bseq + 1}, Parent: &bhead.ID, Time: time.Now().UTC(),
			Kind: "commit", Message: message, Host: head.Host}
		if all && bhead.ID == *vb.Commit {
			next.Root, next.Links = head.Root, head.Links
		} else {
			if err := w.checkConflicts(ctx, *vb.Commit, bhead, picked, force); err != nil {
				return snapshot.Commit{}, err
			}
			links, err := w.repo.ReadLinkTable(ctx, bhead.Links)
			if err != nil {
				return snapshot.Commit{}, err
			}
			src, err := w.repo.ReadLinkTable(ctx, head.Links)
			if err != nil {
				return snapshot.Commit{}, err
			}
			s := newSurgeon(w.repo, nil, links, src)
			root := rootEntry(bhead.Root)
			liveTree := snapshot.CommitTree(head)
			// A path put in place brings its whole subtree: the changes
			// below it are done with it.
			done := map[string]bool{}
			for _, c := range picked {
				if underAny(c.Path, done) {
					continue
				}
				done[c.Path] = true
				var e *snapshot.Entry
				if c.Op != Deleted {
					le, err := w.repo.LookupPath(ctx, liveTree, c.Path)
					if err != nil {
						return snapshot.Commit{}, err
					}
					e = &le
				}
				if root, err = s.replace(ctx, root, c.Path, e); err != nil {
					return snapshot.Commit{}, err
				}
			}
			lref, err := s.finish(ctx)
			if err != nil {
				return snapshot.Commit{}, err
			}
			next.Root, next.Links = rootDir(root), lref
		}
		if err := w.repo.WriteCommit(ctx, next); err != nil {
			return snapshot.Commit{}, fmt.Errorf("commit to %s: %w", branch, err)
		}
		out = next.ID
		nvb := vb
		nvb.Commit, nvb.Snapshot = &next.ID, ""
		return snapshot.Commit{Root: head.Root, Links: head.Links, Virtual: &nvb, Message: "base moved to " + next.ID.String()}, nil
	})
	return out, err
}

// checkConflicts refuses when the base branch changed a picked path since
// the base commit.
func (w *Workspace) checkConflicts(ctx context.Context, base snapshot.CommitID, bhead snapshot.Commit, picked []Change, force bool) error {
	if force || bhead.ID == base {
		return nil
	}
	bc, err := w.repo.ReadCommit(ctx, base)
	if err != nil {
		return err
	}
	var conflicts []string
	err = w.repo.Diff(ctx, snapshot.CommitTree(bc), snapshot.CommitTree(bhead), func(c snapshot.Change) error {
		for _, p := range picked {
			if p.Path == c.Path || strings.HasPrefix(p.Path, c.Path+"/") || strings.HasPrefix(c.Path, p.Path+"/") {
				conflicts = append(conflicts, c.Path)
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("%s changed since the workspace's base: %s (commit with force to overwrite): %w",
			bhead.ID.Branch, strings.Join(conflicts, ", "), ErrConflict)
	}
	return nil
}

// readLive reads a file of the live workspace through the engine.
func (w *Workspace) readLive(ctx context.Context, path string) ([]byte, cache.Attr, error) {
	a, err := lookupPath(ctx, w.vol, path)
	if err != nil {
		return nil, a, err
	}
	// Open's attributes are current (an untouched base file follows the
	// host from its next open on).
	if a, err = w.vol.Open(ctx, a.Ino, false); err != nil {
		return nil, a, err
	}
	defer func() { _ = w.vol.Release(ctx, a.Ino) }()
	buf := make([]byte, a.Size)
	for off := 0; off < len(buf); {
		n, err := w.vol.Read(ctx, a.Ino, buf[off:], uint64(off))
		if err != nil {
			return nil, a, err
		}
		if n == 0 {
			return nil, a, fmt.Errorf("%s: %w", path, io.ErrUnexpectedEOF)
		}
		off += n
	}
	return buf, a, nil
}

func lookupPath(ctx context.Context, v *cache.Volume, path string) (cache.Attr, error) {
	a, err := v.GetAttr(ctx, cache.RootIno)
	if err != nil || path == "" {
		return a, err
	}
	for _, part := range strings.Split(path, "/") {
		if a, err = v.Lookup(ctx, a.Ino, part); err != nil {
			return a, fmt.Errorf("%s: %w", path, err)
		}
	}
	return a, nil
}
