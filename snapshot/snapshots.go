package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentfs/agentfs/blobstore"
)

// Named snapshots, source references ("NAME", "branch@seq", ...) and the
// format-level restore.
//
// A snapshot is the JSON object refs/snapshots/<name>, created with a
// conditional write and never rewritten. It names the commit it was taken
// of and copies that commit's root directory and link table, so it stays
// readable after gc prunes the commit: gc marks every snapshot's tree.
//
// Referencing old data safely while gc runs (the "publish, then verify"
// rule): an operation that makes a new object (snapshot, fork commit,
// restore commit) point at the tree of an existing source first writes its
// object, then checks that the source still exists. gc deletes the commits
// it prunes before it re-reads the refs for its final mark (see gc.go), so
// either the check sees the source gone — and the operation undoes itself
// and fails with ErrSourceGone — or gc's final mark sees the new object.

// SnapshotPrefix is the store prefix of snapshot records.
const SnapshotPrefix = "refs/snapshots/"

// Errors of snapshots, forks and refs; check them with errors.Is.
var (
	// ErrSourceGone: the snapshot or commit an operation copied from was
	// removed (snapshot rm, branch rm, or pruned by gc) while the
	// operation ran; the operation was undone.
	ErrSourceGone = errors.New("source was removed while in use")
	// ErrAmbiguousRef: a bare name is both a snapshot and a branch.
	ErrAmbiguousRef = errors.New("ambiguous reference")
	// ErrNoRef: a reference names no snapshot, branch or commit.
	ErrNoRef = errors.New("no such snapshot, branch or commit")
)

// Snapshot kinds.
const (
	KindManual = "manual" // saved by a user
	KindAuto   = "auto"   // saved by agentfs itself (before a restore)
)

// Snapshot is a named record of a tree: the commit it was taken of and a
// copy of that commit's root and link table.
type Snapshot struct {
	Name   string   `json:"name"`
	Commit CommitID `json:"commit"`
	Root   RootDir  `json:"root"`
	Links  *BlobRef `json:"links,omitempty"`
	// Time is when the snapshot was saved; CommitTime the commit's time.
	Time       time.Time `json:"time"`
	CommitTime time.Time `json:"commit_time"`
	Kind       string    `json:"kind"` // KindManual or KindAuto
	Message    string    `json:"message,omitempty"`
	Host       string    `json:"host,omitempty"`
}

// Tree returns the tree the snapshot names.
func (s Snapshot) Tree() TreeRoot { return TreeRoot{Root: s.Root, Links: s.Links} }

// Files returns the number of non-directory entries of the snapshot's tree
// (each hard link counted), from its root's counters: no tree is read.
func (s Snapshot) Files() uint64 { return s.Root.SubFiles }

// Bytes returns the logical size of the snapshot's files (each hard link
// counted), from its root's counters.
func (s Snapshot) Bytes() uint64 { return s.Root.SubBytes }

// SnapshotKey returns the store key of snapshot name.
func SnapshotKey(name string) string { return SnapshotPrefix + name }

// EncodeSnapshot returns the JSON form of s.
func EncodeSnapshot(s Snapshot) []byte {
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}

// DecodeSnapshot parses and validates a snapshot record.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("snapshot: %w: %w", ErrCorrupt, err)
	}
	if err := ValidateName("snapshot", s.Name); err != nil {
		return s, fmt.Errorf("snapshot: %w: %w", ErrCorrupt, err)
	}
	if ValidateName("branch", s.Commit.Branch) != nil || s.Commit.Seq == 0 {
		return s, fmt.Errorf("snapshot %s: bad commit %v: %w", s.Name, s.Commit, ErrCorrupt)
	}
	if s.Root.Tree.IsZero() {
		return s, fmt.Errorf("snapshot %s: no root tree: %w", s.Name, ErrCorrupt)
	}
	return s, nil
}

// SaveOptions modify SaveSnapshot.
type SaveOptions struct {
	Message string
	// Host is recorded in the snapshot; default os.Hostname().
	Host string
	// Kind is KindManual (the default) or KindAuto.
	Kind string
	// Now returns the current time; default time.Now.
	Now func() time.Time
}

func (o SaveOptions) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func hostOr(h string) string {
	if h != "" {
		return h
	}
	h, _ = os.Hostname()
	return h
}

// SaveSnapshot records commit src (src.Seq 0: the head of src.Branch) as
// snapshot name. It costs a few small requests whatever the tree's size: no
// tree is read. A bad name gives ErrBadName, an existing one
// ErrSnapshotExists (two racing saves of one name: exactly one wins), a
// branch without commits ErrNoCommits, a missing commit ErrMissing, and a
// commit pruned by a concurrent gc while saving ErrSourceGone (nothing is
// left behind). A live writer's unsaved changes are not included: the
// engine syncs first for that.
func (r *Repo) SaveSnapshot(ctx context.Context, name string, src CommitID, opts SaveOptions) (Snapshot, error) {
	if err := ValidateName("snapshot", name); err != nil {
		return Snapshot{}, err
	}
	var c Commit
	var err error
	if src.Seq == 0 {
		if err := ValidateName("branch", src.Branch); err != nil {
			return Snapshot{}, err
		}
		c, err = r.headCommit(ctx, src.Branch)
	} else {
		c, err = r.ReadCommit(ctx, src)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("save snapshot %s: %w", name, err)
	}
	return r.saveCommit(ctx, name, c, opts)
}

// saveCommit records commit c as snapshot name (publish, then verify).
func (r *Repo) saveCommit(ctx context.Context, name string, c Commit, opts SaveOptions) (Snapshot, error) {
	kind := opts.Kind
	if kind == "" {
		kind = KindManual
	}
	s := Snapshot{
		Name: name, Commit: c.ID, Root: c.Root, Links: c.Links,
		Time: opts.now().UTC(), CommitTime: c.Time, Kind: kind, Message: opts.Message, Host: hostOr(opts.Host),
	}
	if err := r.putSnapshot(ctx, s); err != nil {
		return Snapshot{}, err
	}
	if err := r.verifySource(ctx, Source{Commit: c.ID, Tree: CommitTree(c)}); err != nil {
		_ = r.store.Delete(ctx, SnapshotKey(name))
		return Snapshot{}, fmt.Errorf("save snapshot %s: %w", name, err)
	}
	return s, nil
}

func (r *Repo) putSnapshot(ctx context.Context, s Snapshot) error {
	if err := r.CheckVolume(ctx); err != nil {
		return fmt.Errorf("save snapshot %s: %w", s.Name, err)
	}
	err := r.putObjectIfAbsent(ctx, SnapshotKey(s.Name), EncodeSnapshot(s))
	if errors.Is(err, blobstore.ErrExists) {
		return fmt.Errorf("snapshot %q: %w (choose another name, or remove it with `agentfs snapshot rm`)", s.Name, ErrSnapshotExists)
	}
	if err != nil {
		return fmt.Errorf("save snapshot %s: %w", s.Name, err)
	}
	return nil
}

// GetSnapshot reads snapshot name: ErrBadName for an invalid name,
// ErrNoSnapshot if there is none, ErrCorrupt if its record does not decode.
func (r *Repo) GetSnapshot(ctx context.Context, name string) (Snapshot, error) {
	if err := ValidateName("snapshot", name); err != nil {
		return Snapshot{}, err
	}
	b, err := r.getObject(ctx, SnapshotKey(name))
	if errors.Is(err, blobstore.ErrNotFound) {
		return Snapshot{}, fmt.Errorf("snapshot %q: %w", name, ErrNoSnapshot)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("read snapshot %s: %w", name, err)
	}
	s, err := DecodeSnapshot(b)
	if err != nil {
		return s, fmt.Errorf("read snapshot %s: %w", name, err)
	}
	if s.Name != name {
		return s, fmt.Errorf("read snapshot %s: record names %q: %w", name, s.Name, ErrCorrupt)
	}
	return s, nil
}

// DeleteSnapshot removes snapshot name (ErrNoSnapshot if there is none).
// Its data stays until a gc finds it unreferenced.
func (r *Repo) DeleteSnapshot(ctx context.Context, name string) error {
	if err := ValidateName("snapshot", name); err != nil {
		return err
	}
	if err := r.CheckVolume(ctx); err != nil {
		return fmt.Errorf("remove snapshot %s: %w", name, err)
	}
	if _, err := r.store.Stat(ctx, SnapshotKey(name)); errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("snapshot %q: %w", name, ErrNoSnapshot)
	} else if err != nil {
		return fmt.Errorf("remove snapshot %s: %w", name, err)
	}
	if err := r.store.Delete(ctx, SnapshotKey(name)); err != nil {
		return fmt.Errorf("remove snapshot %s: %w", name, err)
	}
	return nil
}

// snapshotNames lists the names of the stored snapshot records, sorted.
func (r *Repo) snapshotNames(ctx context.Context) ([]string, error) {
	objs, err := r.listAll(ctx, SnapshotPrefix)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, strings.TrimPrefix(o.Key, SnapshotPrefix))
	}
	return out, nil
}

// readSnapshots reads every snapshot record (concurrently). A record that
// vanished since the listing is left out; one that does not decode is an
// error naming it.
func (r *Repo) readSnapshots(ctx context.Context) ([]Snapshot, error) {
	names, err := r.snapshotNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Snapshot, len(names))
	found := make([]bool, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, n := range names {
		g.Go(func() error {
			s, err := r.getListedSnapshot(gctx, n)
			if errors.Is(err, ErrNoSnapshot) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%w (remove it with `agentfs snapshot rm URL %s`)", err, n)
			}
			out[i], found[i] = s, true
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	res := out[:0]
	for i := range out {
		if found[i] {
			res = append(res, out[i])
		}
	}
	return res, nil
}

// getListedSnapshot reads a snapshot a listing named. A store whose
// listings show writes in progress (file:// lists the temporary file of a
// write) lists objects that vanish a moment later: a record that does not
// decode is read again after a pause before it is called corrupt.
func (r *Repo) getListedSnapshot(ctx context.Context, name string) (Snapshot, error) {
	s, err := r.GetSnapshot(ctx, name)
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBadName) {
		return s, err
	}
	select {
	case <-ctx.Done():
		return s, ctx.Err()
	case <-time.After(200 * time.Millisecond):
	}
	return r.GetSnapshot(ctx, name)
}

// RefCounts returns the number of branches (head refs) and of snapshots of
// the volume, with two listings and no other reads: for `agentfs status`
// and metrics.
func (r *Repo) RefCounts(ctx context.Context) (branches, snapshots int, err error) {
	heads, err := r.listAll(ctx, "refs/heads/")
	if err != nil {
		return 0, 0, fmt.Errorf("count branches: %w", err)
	}
	snaps, err := r.listAll(ctx, SnapshotPrefix)
	if err != nil {
		return 0, 0, fmt.Errorf("count snapshots: %w", err)
	}
	return len(heads), len(snaps), nil
}

// ListOptions modify ListSnapshots.
type ListOptions struct {
	// Unique computes SnapshotInfo.UniqueBytes. It reads every retained
	// commit and every distinct tree reachable from the retained commits
	// and the snapshots once (twice for a tree reached from two of them);
	// no file data is read. Memory: about 100 bytes per distinct tree and
	// stored blob.
	Unique bool
	// Policy says which commits count as retained for Unique; the zero
	// policy retains every stored commit (as gc --keep-all does; gc
	// without rules applies the volume's policy, Repo.Retention).
	Policy Retention
	// Grace is gc's grace period (default UploadGrace); Now the clock
	// (default: time.Now). Both only matter with a Policy.
	Grace time.Duration
	Now   func() time.Time
	// Progress, if set, is called from one goroutine at a time.
	Progress func(Progress)
}

// SnapshotInfo is a snapshot as ListSnapshots reports it.
type SnapshotInfo struct {
	Snapshot
	// UniqueBytes is the stored size of the blobs (file chunks, trees, link
	// tables) reachable from this snapshot and from no other snapshot and no
	// retained commit: what removing the snapshot makes unreferenced. gc
	// frees it when the packs holding it have no live blob left (partially
	// live packs are kept whole). -1 when not computed.
	UniqueBytes int64
}

// ListSnapshots returns every snapshot, sorted by time then name.
func (r *Repo) ListSnapshots(ctx context.Context, opts ListOptions) ([]SnapshotInfo, error) {
	snaps, err := r.readSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(snaps, func(a, b Snapshot) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	out := make([]SnapshotInfo, len(snaps))
	for i, s := range snaps {
		out[i] = SnapshotInfo{Snapshot: s, UniqueBytes: -1}
	}
	if !opts.Unique || len(snaps) == 0 {
		return out, nil
	}
	prog := newProgressFunc(opts.Progress)
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = UploadGrace
	}
	p, err := r.planRetention(ctx, opts.Policy, now, grace)
	if err != nil {
		return nil, err
	}
	w := newReach(r, 0)
	w.onTree = func(trees, blobs int) { prog(Progress{Phase: "walk", Done: int64(trees), Items: int64(blobs)}) }
	var kept []CommitID
	for _, b := range p.branches {
		for _, cm := range b.commits {
			if cm.keep {
				kept = append(kept, CommitID{b.name, cm.seq})
			}
		}
	}
	err = forEach(ctx, rootsInFlight, kept, func(ctx context.Context, id CommitID) error {
		c, err := r.ReadCommit(ctx, id)
		if errors.Is(err, ErrMissing) {
			return nil // removed since the listing
		}
		if err != nil {
			return err
		}
		if err := w.root(ctx, CommitTree(c), 0); err != nil {
			return fmt.Errorf("commit %v: %w", c.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	idx := make([]int, len(snaps))
	for i := range idx {
		idx[i] = i
	}
	err = forEach(ctx, rootsInFlight, idx, func(ctx context.Context, i int) error {
		if err := w.root(ctx, snaps[i].Tree(), int32(i+1)); err != nil {
			return fmt.Errorf("snapshot %s: %w", snaps[i].Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	unique := make([]int64, len(snaps)+1)
	for _, st := range w.blobs {
		if st.owner > 0 {
			unique[st.owner] += int64(st.length)
		}
	}
	// out is sorted like snaps.
	for i := range out {
		out[i].UniqueBytes = unique[i+1]
	}
	return out, nil
}

// Source is what a reference resolves to: a snapshot, or a commit of a
// branch.
type Source struct {
	// Snapshot is the snapshot's name when the reference named one.
	Snapshot string
	// Commit is the commit: the one the snapshot was taken of, or the
	// branch's commit.
	Commit CommitID
	Tree   TreeRoot
	Time   time.Time // the snapshot's or the commit's time
}

// String describes the source for messages: "snapshot NAME (of main@3)" or
// "main@3".
func (s Source) String() string {
	if s.Snapshot != "" {
		return fmt.Sprintf("snapshot %s (of %v)", s.Snapshot, s.Commit)
	}
	return s.Commit.String()
}

// Resolve turns a reference into the tree it names. Forms:
//
//	snapshot:NAME       the snapshot NAME
//	branch:NAME[@SEQ]   the head (or commit SEQ) of branch NAME
//	NAME@SEQ            commit SEQ of branch NAME
//	NAME                the snapshot NAME if there is one, else the head of
//	                    branch NAME; both existing is ErrAmbiguousRef
//
// A reference naming nothing gives ErrNoRef (or ErrBadName for a malformed
// one).
func (r *Repo) Resolve(ctx context.Context, ref string) (Source, error) {
	switch {
	case strings.HasPrefix(ref, "snapshot:"):
		return r.resolveSnapshot(ctx, strings.TrimPrefix(ref, "snapshot:"))
	case strings.HasPrefix(ref, "branch:"):
		return r.resolveBranch(ctx, strings.TrimPrefix(ref, "branch:"))
	case strings.Contains(ref, "@"):
		return r.resolveBranch(ctx, ref)
	}
	if err := ValidateName("reference", ref); err != nil {
		return Source{}, err
	}
	// Both lookups at once: a reference costs the round trips of one.
	var snap Source
	var serr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		snap, serr = r.resolveSnapshot(ctx, ref)
	}()
	br, berr := r.resolveBranch(ctx, ref)
	<-done
	if serr != nil && !errors.Is(serr, ErrNoRef) {
		return Source{}, serr
	}
	if berr != nil && !errors.Is(berr, ErrNoRef) {
		return Source{}, berr
	}
	switch {
	case serr == nil && berr == nil:
		return Source{}, fmt.Errorf("%q is both a snapshot and a branch: write snapshot:%s or branch:%s: %w", ref, ref, ref, ErrAmbiguousRef)
	case serr == nil:
		return snap, nil
	case berr == nil:
		return br, nil
	}
	return Source{}, fmt.Errorf("%q: %w (see `agentfs snapshot list` and `agentfs branch list`)", ref, ErrNoRef)
}

func (r *Repo) resolveSnapshot(ctx context.Context, name string) (Source, error) {
	s, err := r.GetSnapshot(ctx, name)
	if errors.Is(err, ErrNoSnapshot) {
		return Source{}, fmt.Errorf("snapshot %q: %w", name, ErrNoRef)
	}
	if err != nil {
		return Source{}, err
	}
	return Source{Snapshot: s.Name, Commit: s.Commit, Tree: s.Tree(), Time: s.Time}, nil
}

func (r *Repo) resolveBranch(ctx context.Context, ref string) (Source, error) {
	branch, seqStr, hasSeq := strings.Cut(ref, "@")
	if err := ValidateName("branch", branch); err != nil {
		return Source{}, err
	}
	if !hasSeq || seqStr == "head" {
		c, err := r.headCommit(ctx, branch)
		if errors.Is(err, ErrNoCommits) {
			return Source{}, fmt.Errorf("branch %q: %w", branch, ErrNoRef)
		}
		if err != nil {
			return Source{}, err
		}
		return Source{Commit: c.ID, Tree: CommitTree(c), Time: c.Time}, nil
	}
	seq, err := strconv.ParseUint(seqStr, 10, 64)
	if err != nil || seq == 0 {
		return Source{}, fmt.Errorf("reference %q: commit number must be a positive integer or \"head\": %w", ref, ErrBadName)
	}
	c, err := r.ReadCommit(ctx, CommitID{branch, seq})
	if errors.Is(err, ErrMissing) {
		return Source{}, fmt.Errorf("commit %s@%d: %w (pruned, or never written)", branch, seq, ErrNoRef)
	}
	if err != nil {
		return Source{}, err
	}
	return Source{Commit: c.ID, Tree: CommitTree(c), Time: c.Time}, nil
}

// headCommit returns the newest commit of branch (ErrNoCommits if none).
// In the common case it costs two round trips: the head hint, then the
// hinted commit and a probe for the next one at once; otherwise it falls
// back to Head.
func (r *Repo) headCommit(ctx context.Context, branch string) (Commit, error) {
	b, err := r.getObject(ctx, HeadKey(branch))
	var h headHint
	if err == nil && json.Unmarshal(b, &h) == nil && h.Seq > 0 {
		var serr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, serr = r.store.Stat(ctx, CommitKey(CommitID{branch, h.Seq + 1}))
		}()
		c, cerr := r.ReadCommit(ctx, CommitID{branch, h.Seq})
		<-done
		if cerr == nil && errors.Is(serr, blobstore.ErrNotFound) {
			return c, nil
		}
	} else if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return Commit{}, fmt.Errorf("read head of %s: %w", branch, err)
	}
	return r.Head(ctx, branch)
}

// verifySource checks that src still exists: a snapshot record with the
// same root tree, or the commit object. It is the "verify" half of the
// publish-then-verify rule (see the top of this file). It is needed even
// for a branch head: the branch may be removed (branch rm) meanwhile.
func (r *Repo) verifySource(ctx context.Context, src Source) error {
	if src.Snapshot != "" {
		s, err := r.GetSnapshot(ctx, src.Snapshot)
		if errors.Is(err, ErrNoSnapshot) || err == nil && s.Root.Tree != src.Tree.Root.Tree {
			return fmt.Errorf("snapshot %s: %w", src.Snapshot, ErrSourceGone)
		}
		return err
	}
	_, err := r.store.Stat(ctx, CommitKey(src.Commit))
	if errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("commit %v: %w (pruned by a concurrent gc, or its branch removed)", src.Commit, ErrSourceGone)
	}
	if err != nil {
		return fmt.Errorf("check commit %v: %w", src.Commit, err)
	}
	return nil
}

// RestoreOptions modify Restore.
type RestoreOptions struct {
	// Writer is the lease holder ID of the caller when it holds the
	// branch's writer lease (a live mount restoring itself); a live lease
	// of anyone else makes Restore fail with a *LeaseHeldError.
	Writer  string
	Message string
	Host    string // default os.Hostname()
	Now     func() time.Time
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	// Saved is the automatic snapshot of the branch's state before the
	// restore; nil when the branch had no commits.
	Saved *Snapshot
	// Commit is the new head of the branch, whose tree is the source's.
	Commit Commit
}

// Restore makes src (any reference Resolve accepts) the state of branch:
// it first saves the branch's head as an automatic snapshot named
// auto-pre-restore-<branch>-<time>, then writes a commit of kind "restore"
// whose root and link table are the source's and whose parent is the old
// head. A branch without commits is created. Nothing is lost: the previous
// state stays reachable from the automatic snapshot.
//
// It refuses (a *LeaseHeldError, matching ErrLeaseHeld) when a live writer
// other than opts.Writer holds the branch: a mount would overwrite the
// restore with its next checkpoint. A commit race (ErrCommitExists) leaves
// the automatic snapshot in place and changes nothing else. If the source
// is removed while restoring (ErrSourceGone), the branch is put back to its
// previous tree with one more commit. A live mount calls this with its
// lease held and then resets its namespace to Commit.
func (r *Repo) Restore(ctx context.Context, ref, branch string, opts RestoreOptions) (RestoreResult, error) {
	if err := ValidateName("branch", branch); err != nil {
		return RestoreResult{}, err
	}
	src, err := r.Resolve(ctx, ref)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore %s: %w", branch, err)
	}
	return r.restoreSource(ctx, src, branch, opts)
}

// restoreSource is Restore of a resolved source.
func (r *Repo) restoreSource(ctx context.Context, src Source, branch string, opts RestoreOptions) (RestoreResult, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	li, err := r.CurrentLease(ctx, branch, now())
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore %s: %w", branch, err)
	}
	if li != nil && li.Live && li.Holder.ID != opts.Writer {
		return RestoreResult{}, &LeaseHeldError{Branch: branch, Holder: li.Holder, Expires: li.Expires}
	}
	var res RestoreResult
	var prev *Commit
	head, err := r.HeadSeq(ctx, branch)
	switch {
	case errors.Is(err, ErrNoCommits):
	case err != nil:
		return res, fmt.Errorf("restore %s: %w", branch, err)
	default:
		c, err := r.ReadCommit(ctx, CommitID{branch, head})
		if err != nil {
			return res, fmt.Errorf("restore %s: %w", branch, err)
		}
		prev = &c
		s, err := r.saveAuto(ctx, "auto-pre-restore-"+branch, c, SaveOptions{
			Kind: KindAuto, Now: now, Host: opts.Host,
			Message: fmt.Sprintf("state of %s before restoring %s", branch, src),
		})
		if err != nil {
			return res, fmt.Errorf("restore %s: save the current state first: %w", branch, err)
		}
		res.Saved = &s
	}
	msg := opts.Message
	if msg == "" {
		msg = "restore of " + src.String()
	}
	c := Commit{
		ID:   CommitID{Branch: branch, Seq: head + 1},
		Root: src.Tree.Root, Links: src.Tree.Links,
		Time: now().UTC(), Kind: "restore", Message: msg, Host: hostOr(opts.Host), Writer: opts.Writer,
	}
	if prev != nil {
		c.Parent = &prev.ID
	}
	if err := r.WriteCommit(ctx, c); err != nil {
		return res, fmt.Errorf("restore %s: %w", branch, err)
	}
	if err := r.verifySource(ctx, src); err != nil {
		if prev != nil {
			back := c
			back.ID, back.Parent = CommitID{branch, c.ID.Seq + 1}, &c.ID
			back.Root, back.Links = prev.Root, prev.Links
			back.Kind, back.Message = "restore", fmt.Sprintf("undo the restore of %s (its source was removed)", src)
			back.Time = now().UTC()
			if werr := r.WriteCommit(ctx, back); werr != nil {
				return res, fmt.Errorf("restore %s: %w; putting the branch back failed too: %w (its previous state is snapshot %s)", branch, err, werr, res.Saved.Name)
			}
		} else {
			_ = r.store.Delete(ctx, CommitKey(c.ID))
			_ = r.store.Delete(ctx, HeadKey(branch))
		}
		return res, fmt.Errorf("restore %s: %w", branch, err)
	}
	res.Commit = c
	return res, nil
}

// saveAuto saves an automatic snapshot named prefix-<time>, adding -2, -3,
// ... when the name is taken.
func (r *Repo) saveAuto(ctx context.Context, prefix string, c Commit, opts SaveOptions) (Snapshot, error) {
	stamp := "-" + opts.now().UTC().Format("20060102T150405.000Z")
	if len(prefix)+len(stamp)+4 > 100 {
		prefix = prefix[:100-len(stamp)-4]
	}
	for i := 1; ; i++ {
		name := prefix + stamp
		if i > 1 {
			name += "-" + strconv.Itoa(i)
		}
		s, err := r.saveCommit(ctx, name, c, opts)
		if errors.Is(err, ErrSnapshotExists) && i < 100 {
			continue
		}
		return s, err
	}
}

// Progress reports the advance of a long operation (gc, fsck, unique
// sizes). Callbacks receive it from one goroutine at a time.
type Progress struct {
	Phase string // what is being done, e.g. "list", "mark", "sweep"
	Done  int64  // units done in this phase
	Total int64  // units in this phase; 0 when unknown
	Items int64  // a secondary count (blobs marked, bytes checked, ...)
}

// newProgressFunc serializes calls to fn (nil: a no-op).
func newProgressFunc(fn func(Progress)) func(Progress) {
	if fn == nil {
		return func(Progress) {}
	}
	var mu sync.Mutex
	return func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		fn(p)
	}
}
