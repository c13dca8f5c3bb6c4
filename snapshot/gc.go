package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentfs/agentfs/blobstore"
)

// Garbage collection: retention of old commits, then mark and sweep of
// packs. It runs while volumes are mounted and writing.
//
//  1. Clock: the store's own clock (the modification time of a probe
//     object), so pack ages are compared with times of the same clock.
//  2. List every pack with its size and modification time.
//  3. List every commit; decide per branch which to keep (Retention; the
//     head, and any commit superseded less than the grace period ago, are
//     always kept). Read every snapshot record.
//  4. Mark: walk the trees and link tables of every kept commit and every
//     snapshot, skipping subtrees already seen (by tree hash), and record
//     every stored blob location they reach.
//  5. Delete the pruned commit objects.
//  6. Recheck: list commits and snapshots again and mark every one that
//     appeared since step 3.
//  7. Sweep: delete the packs from step 2 that nothing marked and that are
//     older than the grace period.
//
// Why a live writer loses nothing: a writer's commit references (a) blobs
// reachable from its parent, which is the branch head when the commit is
// written, and (b) blobs in packs it uploaded in this checkpoint. (b) is
// protected by the grace period: a pack younger than it is never swept,
// and a writer whose checkpoint takes longer than half of it checks that
// its packs still exist before committing. For (a): a commit written
// before step 6 is marked in step 6; one written after has a parent that
// was the head at step 6 or newer, all of whose old blobs are marked.
// Snapshots, forks and restores copy the tree of a possibly non-head
// source; they write their object first and then check that the source
// still exists (snapshots.go), while gc deletes pruned commits (step 5)
// before its recheck (step 6): either the check fails and the operation
// undoes itself, or the recheck marks the new object.
//
// Packs with some live blobs are kept whole (no repacking); their dead
// bytes are reported.

// GCOptions modify GC.
type GCOptions struct {
	// Policy says which commits to keep; the zero value keeps every
	// commit. The volume's own policy is Repo.Retention.
	Policy Retention
	// VolumePolicy applies the volume's own policy (Repo.Retention: its
	// retention.json, or DefaultRetention) instead of Policy.
	VolumePolicy bool
	// DryRun computes everything and deletes nothing.
	DryRun bool
	// Grace is how old an unreferenced pack must be to be deleted, and how
	// long a superseded commit is kept; default UploadGrace. Only tests
	// should lower it: it must exceed the longest checkpoint of any writer.
	Grace time.Duration
	// Now returns the current time; default the store's clock (see GC).
	Now func() time.Time
	// Concurrency bounds the tree reads and deletes in flight; default 16.
	Concurrency int
	// Progress, if set, is called from one goroutine at a time.
	Progress func(Progress)

	hooks *gcHooks // tests: called between phases
}

type gcHooks struct {
	afterMark    func()
	afterRecheck func()
}

// GCReport says what a gc did (or, with DryRun, would do).
type GCReport struct {
	DryRun bool          `json:"dry_run"`
	Policy string        `json:"policy"`
	Now    time.Time     `json:"now"`
	Clock  string        `json:"clock"` // "store", "local" (the probe failed) or "injected"
	Grace  time.Duration `json:"grace_ns"`

	Branches      int `json:"branches"`
	CommitsKept   int `json:"commits_kept"`
	CommitsPruned int `json:"commits_pruned"`
	// Pruned lists, per branch, the numbers of the commits removed (or,
	// with DryRun, that would be).
	Pruned    map[string][]uint64 `json:"pruned,omitempty"`
	Snapshots int                 `json:"snapshots"`
	// Recheck found these commits and snapshots written during the gc.
	NewCommits   int `json:"new_commits"`
	NewSnapshots int `json:"new_snapshots"`

	TreesRead   int `json:"trees_read"`
	BlobsMarked int `json:"blobs_marked"`

	PacksTotal int   `json:"packs_total"`
	BytesTotal int64 `json:"bytes_total"`
	PacksLive  int   `json:"packs_live"`
	PacksYoung int   `json:"packs_young"` // unreferenced but within the grace period: kept
	PacksSwept int   `json:"packs_swept"`
	BytesFreed int64 `json:"bytes_freed"`
	PackErrors int   `json:"pack_errors"` // deletes or footer reads that failed
	// PartialPacks hold both live and dead blobs; they are kept whole and
	// DeadBytes counts their dead blobs' stored bytes.
	PartialPacks int   `json:"partial_packs"`
	DeadBytes    int64 `json:"dead_bytes"`
	// MissingPacks are referenced by a kept commit or a snapshot but do not
	// exist: the volume is damaged (run fsck).
	MissingPacks int `json:"missing_packs"`

	Duration time.Duration `json:"duration_ns"`
}

// commitObj is one listed commit object.
type commitObj struct {
	seq  uint64
	mod  time.Time
	keep bool
}

type branchPlan struct {
	name    string
	commits []commitObj // increasing seq
}

type retentionPlan struct {
	branches []branchPlan
	listed   map[CommitID]bool
}

// listCommitObjects lists every commit object, grouped by branch.
func (r *Repo) listCommitObjects(ctx context.Context) (map[string][]commitObj, error) {
	out := map[string][]commitObj{}
	objs, err := r.listAll(ctx, "commits/")
	if err != nil {
		return nil, fmt.Errorf("list commits: %w", err)
	}
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Key, "commits/")
		branch, name, ok := strings.Cut(rest, "/")
		if !ok || strings.Contains(name, "/") {
			continue
		}
		if seq, ok := parseSeq(name); ok {
			out[branch] = append(out[branch], commitObj{seq: seq, mod: o.ModTime})
		}
	}
	for _, cs := range out {
		slices.SortFunc(cs, func(a, b commitObj) int { return cmpU64(a.seq, b.seq) })
	}
	return out, nil
}

// parseSeq parses the name of a commit object (16 hex digits, not 0).
func parseSeq(name string) (uint64, bool) {
	seq, err := strconv.ParseUint(name, 16, 64)
	return seq, err == nil && seq != 0 && len(name) == 16
}

// packOfKey returns the pack a store key names (packs/xx/<id>.pack).
func packOfKey(key string) (PackID, bool) {
	name := key[strings.LastIndexByte(key, '/')+1:]
	if !strings.HasSuffix(name, ".pack") {
		return PackID{}, false
	}
	id, err := ParsePackID(strings.TrimSuffix(name, ".pack"))
	return id, err == nil && PackKey(id) == key
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// planRetention lists the commits and decides which to keep.
func (r *Repo) planRetention(ctx context.Context, p Retention, now time.Time, grace time.Duration) (*retentionPlan, error) {
	objs, err := r.listCommitObjects(ctx)
	if err != nil {
		return nil, err
	}
	plan := &retentionPlan{listed: map[CommitID]bool{}}
	for branch, cs := range objs {
		mods := make([]time.Time, len(cs))
		for i, c := range cs {
			plan.listed[CommitID{branch, c.seq}] = true
			mods[i] = c.mod
		}
		for i, k := range p.keep(mods, now, grace) {
			cs[i].keep = k
		}
		plan.branches = append(plan.branches, branchPlan{name: branch, commits: cs})
	}
	slices.SortFunc(plan.branches, func(a, b branchPlan) int { return strings.Compare(a.name, b.name) })
	return plan, nil
}

// clockSlack is added to every age gc compares: stores report modification
// times truncated to the second (S3, GCS), so two of them can differ by up
// to a second more than the times they stand for.
const clockSlack = time.Second

// storeNow returns the store's current time: the modification time of a
// probe object it writes and removes. On failure it returns the local
// clock and false.
func (r *Repo) storeNow(ctx context.Context) (time.Time, bool) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := "gc/clock-" + hex.EncodeToString(b[:])
	if err := r.store.Put(ctx, key, nil); err != nil {
		return time.Now(), false
	}
	defer func() { _ = r.store.Delete(context.WithoutCancel(ctx), key) }()
	a, err := r.store.Stat(ctx, key)
	if err != nil || a.ModTime.IsZero() {
		return time.Now(), false
	}
	return a.ModTime, true
}

// GC deletes what no retained commit and no snapshot reaches; see the
// comment at the top of gc.go for the steps and why it is safe while
// volumes are mounted. It returns a report even on error (what was done so
// far). A tree that a kept commit or snapshot references but that is
// missing or corrupt aborts the gc before anything is swept (run fsck).
// Memory is dominated by the mark: about 100 bytes per distinct tree and
// per distinct stored blob reachable (GCReport.TreesRead, BlobsMarked).
func (r *Repo) GC(ctx context.Context, opts GCOptions) (rep GCReport, err error) {
	started := time.Now()
	rep = GCReport{DryRun: opts.DryRun}
	defer func() { rep.Duration = time.Since(started) }()
	if opts.VolumePolicy {
		if opts.Policy, _, err = r.Retention(ctx); err != nil {
			return rep, fmt.Errorf("gc: %w", err)
		}
	}
	rep.Policy = opts.Policy.String()
	if err := opts.Policy.Validate(); err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = UploadGrace
	}
	rep.Grace = grace
	conc := opts.Concurrency
	if conc <= 0 {
		conc = 16
	}
	prog := newProgressFunc(opts.Progress)

	var now time.Time
	switch {
	case opts.Now != nil:
		now, rep.Clock = opts.Now(), "injected"
	default:
		var ok bool
		now, ok = r.storeNow(ctx)
		rep.Clock = map[bool]string{true: "store", false: "local"}[ok]
	}
	rep.Now = now

	// 2. Packs.
	prog(Progress{Phase: "list"})
	type packInfo struct {
		size int64
		mod  time.Time
	}
	packs := map[PackID]packInfo{}
	listed, err := r.listAll(ctx, "packs/")
	if err != nil {
		return rep, fmt.Errorf("gc: list packs: %w", err)
	}
	for _, o := range listed {
		if id, ok := packOfKey(o.Key); ok {
			packs[id] = packInfo{size: o.Size, mod: o.ModTime}
			rep.BytesTotal += o.Size
		}
	}
	rep.PacksTotal = len(packs)

	// 3. Commits and snapshots.
	plan, err := r.planRetention(ctx, opts.Policy, now, grace)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	snaps, err := r.readSnapshots(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	rep.Branches, rep.Snapshots = len(plan.branches), len(snaps)
	var total int64
	for _, b := range plan.branches {
		for _, c := range b.commits {
			if c.keep {
				rep.CommitsKept++
			} else {
				rep.CommitsPruned++
				if rep.Pruned == nil {
					rep.Pruned = map[string][]uint64{}
				}
				rep.Pruned[b.name] = append(rep.Pruned[b.name], c.seq)
			}
		}
	}
	total = int64(rep.CommitsKept + len(snaps))

	// 4. Mark.
	w := newReach(r, conc)
	var done atomic.Int64
	w.onTree = func(trees, blobs int) {
		if trees%64 == 0 {
			prog(Progress{Phase: "mark", Done: done.Load(), Total: total, Items: int64(blobs)})
		}
	}
	markCommit := func(ctx context.Context, id CommitID) error {
		defer done.Add(1)
		c, err := r.ReadCommit(ctx, id)
		if errors.Is(err, ErrMissing) {
			return nil // removed since the listing (branch rm, another gc)
		}
		if err != nil {
			return err
		}
		if err := w.root(ctx, CommitTree(c), 0); err != nil {
			if _, serr := r.store.Stat(ctx, CommitKey(id)); errors.Is(serr, blobstore.ErrNotFound) {
				return nil // removed while we walked it
			}
			return fmt.Errorf("commit %v: %w", id, err)
		}
		return nil
	}
	markSnapshot := func(ctx context.Context, s Snapshot) error {
		defer done.Add(1)
		if err := w.root(ctx, s.Tree(), 0); err != nil {
			if _, gerr := r.GetSnapshot(ctx, s.Name); errors.Is(gerr, ErrNoSnapshot) {
				return nil
			}
			return fmt.Errorf("snapshot %s: %w", s.Name, err)
		}
		return nil
	}
	damaged := func(err error) error {
		return fmt.Errorf("gc: %w; nothing was swept (run `agentfs fsck` on this volume)", err)
	}
	var kept []CommitID
	for _, b := range plan.branches {
		for _, c := range b.commits {
			if c.keep {
				kept = append(kept, CommitID{b.name, c.seq})
			}
		}
	}
	if err := forEach(ctx, rootsInFlight, kept, markCommit); err != nil {
		return rep, damaged(err)
	}
	if err := forEach(ctx, rootsInFlight, snaps, markSnapshot); err != nil {
		return rep, damaged(err)
	}
	if opts.hooks != nil && opts.hooks.afterMark != nil {
		opts.hooks.afterMark()
	}

	// 5. Prune commit objects, oldest first.
	if !opts.DryRun && rep.CommitsPruned > 0 {
		var n int64
		for _, b := range plan.branches {
			for _, c := range b.commits {
				if c.keep {
					continue
				}
				if err := r.store.Delete(ctx, CommitKey(CommitID{b.name, c.seq})); err != nil {
					return rep, fmt.Errorf("gc: prune commit %s@%d: %w", b.name, c.seq, err)
				}
				n++
				prog(Progress{Phase: "prune", Done: n, Total: int64(rep.CommitsPruned)})
			}
		}
	}

	// 6. Recheck: commits and snapshots written since step 3.
	prog(Progress{Phase: "recheck"})
	objs, err := r.listCommitObjects(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: recheck: %w", err)
	}
	var fresh []CommitID
	for branch, cs := range objs {
		for _, c := range cs {
			if id := (CommitID{branch, c.seq}); !plan.listed[id] {
				fresh = append(fresh, id)
			}
		}
	}
	rep.NewCommits = len(fresh)
	if err := forEach(ctx, rootsInFlight, fresh, markCommit); err != nil {
		return rep, damaged(err)
	}
	seen := make(map[string]BlobRef, len(snaps))
	for _, s := range snaps {
		seen[s.Name] = s.Root.Tree
	}
	snaps2, err := r.readSnapshots(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: recheck: %w", err)
	}
	var freshSnaps []Snapshot
	for _, s := range snaps2 {
		if t, ok := seen[s.Name]; !ok || t != s.Root.Tree {
			freshSnaps = append(freshSnaps, s)
		}
	}
	rep.NewSnapshots = len(freshSnaps)
	if err := forEach(ctx, rootsInFlight, freshSnaps, markSnapshot); err != nil {
		return rep, damaged(err)
	}
	if opts.hooks != nil && opts.hooks.afterRecheck != nil {
		opts.hooks.afterRecheck()
	}
	rep.TreesRead, rep.BlobsMarked = w.reads, len(w.blobs)

	// Live bytes per pack (the mark is final from here on).
	live := map[PackID]int{}
	for loc := range w.blobs {
		live[loc.Pack]++
	}
	for id := range live {
		if _, ok := packs[id]; ok {
			continue
		}
		if _, err := r.store.Stat(ctx, PackKey(id)); errors.Is(err, blobstore.ErrNotFound) {
			rep.MissingPacks++
		}
	}

	// 7. Sweep.
	var victims []PackID
	cutoff := now.Add(-grace - clockSlack)
	for id, p := range packs {
		if live[id] > 0 {
			rep.PacksLive++
			continue
		}
		if !p.mod.Before(cutoff) {
			rep.PacksYoung++
			continue
		}
		victims = append(victims, id)
	}
	slices.SortFunc(victims, func(a, b PackID) int { return strings.Compare(a.String(), b.String()) })
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	var swept int64
	for _, id := range victims {
		size := packs[id].size
		if opts.DryRun {
			rep.PacksSwept++
			rep.BytesFreed += size
			continue
		}
		g.Go(func() error {
			err := r.store.Delete(gctx, PackKey(id))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if gctx.Err() != nil {
					return gctx.Err()
				}
				rep.PackErrors++
				return nil
			}
			rep.PacksSwept++
			rep.BytesFreed += size
			swept++
			prog(Progress{Phase: "sweep", Done: swept, Total: int64(len(victims)), Items: rep.BytesFreed})
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return rep, fmt.Errorf("gc: sweep: %w", err)
	}

	// Dead bytes of partially live packs (footers only).
	var scanned int64
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for id := range live {
		if _, ok := packs[id]; !ok {
			continue
		}
		g.Go(func() error {
			entries, err := r.ReadPackIndex(gctx, id)
			mu.Lock()
			defer mu.Unlock()
			scanned++
			prog(Progress{Phase: "scan", Done: scanned, Total: int64(len(live))})
			if err != nil {
				if gctx.Err() != nil {
					return gctx.Err()
				}
				rep.PackErrors++
				return nil
			}
			var dead int64
			for _, e := range entries {
				if _, ok := w.blobs[BlobLoc{id, e.Offset}]; !ok {
					dead += int64(e.Length)
				}
			}
			if dead > 0 {
				rep.PartialPacks++
				rep.DeadBytes += dead
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return rep, fmt.Errorf("gc: scan packs: %w", err)
	}
	if opts.VolumePolicy && !opts.DryRun {
		if err := r.recordGC(ctx, rep); err != nil {
			return rep, fmt.Errorf("gc: record the run: %w", err)
		}
	}
	return rep, nil
}
