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
	g, err := r.newGCRun(ctx, opts, &rep)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	steps := []func(context.Context) error{
		g.listPacks,   // 2
		g.planCommits, // 3
		g.mark,        // 4
		g.prune,       // 5
		g.recheck,     // 6
		g.countLive,
		g.sweep, // 7
		g.scanPartial,
		g.record,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// gcRun is one run of GC: its settings, what each step leaves for the
// next, and the report it fills in. The steps run one after another, in
// GC's goroutine; mu guards rep only while sweep and scanPartial run their
// workers.
type gcRun struct {
	r     *Repo
	opts  GCOptions
	rep   *GCReport
	prog  func(Progress)
	now   time.Time     // step 1: the store's clock
	grace time.Duration // opts.Grace or UploadGrace
	conc  int           // requests in flight

	packs map[PackID]packInfo // step 2: every pack listed
	plan  *retentionPlan      // step 3: the commits listed, and which to keep
	snaps []Snapshot          // step 3: the snapshots read
	w     *reach              // step 4: the mark, final after step 6
	done  atomic.Int64        // roots marked, for progress
	total int64               // roots to mark in step 4, for progress
	live  map[PackID]int      // countLive: marked blobs per pack

	mu sync.Mutex
}

// packInfo is one listed pack.
type packInfo struct {
	size int64
	mod  time.Time
}

// newGCRun settles the options and reads the clock (step 1).
func (r *Repo) newGCRun(ctx context.Context, opts GCOptions, rep *GCReport) (*gcRun, error) {
	if opts.VolumePolicy {
		var err error
		if opts.Policy, _, err = r.Retention(ctx); err != nil {
			return nil, err
		}
	}
	rep.Policy = opts.Policy.String()
	if err := opts.Policy.Validate(); err != nil {
		return nil, err
	}
	g := &gcRun{r: r, opts: opts, rep: rep, prog: newProgressFunc(opts.Progress), grace: opts.Grace, conc: opts.Concurrency}
	if g.grace <= 0 {
		g.grace = UploadGrace
	}
	rep.Grace = g.grace
	if g.conc <= 0 {
		g.conc = 16
	}
	if opts.Now != nil {
		g.now, rep.Clock = opts.Now(), "injected"
	} else {
		var ok bool
		g.now, ok = r.storeNow(ctx)
		rep.Clock = map[bool]string{true: "store", false: "local"}[ok]
	}
	rep.Now = g.now
	return g, nil
}

// listPacks lists every pack with its size and modification time (step 2).
func (g *gcRun) listPacks(ctx context.Context) error {
	g.prog(Progress{Phase: "list"})
	listed, err := g.r.listAll(ctx, "packs/")
	if err != nil {
		return fmt.Errorf("gc: list packs: %w", err)
	}
	g.packs = map[PackID]packInfo{}
	for _, o := range listed {
		if id, ok := packOfKey(o.Key); ok {
			g.packs[id] = packInfo{size: o.Size, mod: o.ModTime}
			g.rep.BytesTotal += o.Size
		}
	}
	g.rep.PacksTotal = len(g.packs)
	return nil
}

// planCommits lists the commits, decides which to keep, and reads every
// snapshot record (step 3).
func (g *gcRun) planCommits(ctx context.Context) (err error) {
	if g.plan, err = g.r.planRetention(ctx, g.opts.Policy, g.now, g.grace); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	if g.snaps, err = g.r.readSnapshots(ctx); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	rep := g.rep
	rep.Branches, rep.Snapshots = len(g.plan.branches), len(g.snaps)
	for _, b := range g.plan.branches {
		for _, c := range b.commits {
			if c.keep {
				rep.CommitsKept++
				continue
			}
			rep.CommitsPruned++
			if rep.Pruned == nil {
				rep.Pruned = map[string][]uint64{}
			}
			rep.Pruned[b.name] = append(rep.Pruned[b.name], c.seq)
		}
	}
	g.total = int64(rep.CommitsKept + len(g.snaps))
	return nil
}

// mark walks every kept commit and every snapshot, recording the blobs
// they reach (step 4).
func (g *gcRun) mark(ctx context.Context) error {
	g.w = newReach(g.r, g.conc)
	g.w.onTree = func(trees, blobs int) {
		if trees%64 == 0 {
			g.prog(Progress{Phase: "mark", Done: g.done.Load(), Total: g.total, Items: int64(blobs)})
		}
	}
	var kept []CommitID
	for _, b := range g.plan.branches {
		for _, c := range b.commits {
			if c.keep {
				kept = append(kept, CommitID{b.name, c.seq})
			}
		}
	}
	if err := forEach(ctx, rootsInFlight, kept, g.markCommit); err != nil {
		return gcDamaged(err)
	}
	if err := forEach(ctx, rootsInFlight, g.snaps, g.markSnapshot); err != nil {
		return gcDamaged(err)
	}
	if h := g.opts.hooks; h != nil && h.afterMark != nil {
		h.afterMark()
	}
	return nil
}

// markCommit marks what commit id reaches; a commit removed since it was
// listed (branch rm, another gc) is skipped.
func (g *gcRun) markCommit(ctx context.Context, id CommitID) error {
	defer g.done.Add(1)
	c, err := g.r.ReadCommit(ctx, id)
	if errors.Is(err, ErrMissing) {
		return nil // removed since the listing
	}
	if err != nil {
		return err
	}
	if err := g.w.root(ctx, CommitTree(c), 0); err != nil {
		if _, serr := g.r.store.Stat(ctx, CommitKey(id)); errors.Is(serr, blobstore.ErrNotFound) {
			return nil // removed while we walked it
		}
		return fmt.Errorf("commit %v: %w", id, err)
	}
	return nil
}

// markSnapshot marks what snapshot s reaches; a snapshot removed while it
// was walked is skipped.
func (g *gcRun) markSnapshot(ctx context.Context, s Snapshot) error {
	defer g.done.Add(1)
	if err := g.w.root(ctx, s.Tree(), 0); err != nil {
		if _, gerr := g.r.GetSnapshot(ctx, s.Name); errors.Is(gerr, ErrNoSnapshot) {
			return nil
		}
		return fmt.Errorf("snapshot %s: %w", s.Name, err)
	}
	return nil
}

// gcDamaged wraps a mark's failure: a reachable tree is missing or corrupt.
func gcDamaged(err error) error {
	return fmt.Errorf("gc: %w; nothing was swept (run `agentfs fsck` on this volume)", err)
}

// prune deletes the commit objects retention does not keep, oldest first
// (step 5).
func (g *gcRun) prune(ctx context.Context) error {
	if g.opts.DryRun || g.rep.CommitsPruned == 0 {
		return nil
	}
	var n int64
	for _, b := range g.plan.branches {
		for _, c := range b.commits {
			if c.keep {
				continue
			}
			if err := g.r.store.Delete(ctx, CommitKey(CommitID{b.name, c.seq})); err != nil {
				return fmt.Errorf("gc: prune commit %s@%d: %w", b.name, c.seq, err)
			}
			n++
			g.prog(Progress{Phase: "prune", Done: n, Total: int64(g.rep.CommitsPruned)})
		}
	}
	return nil
}

// recheck lists commits and snapshots again and marks every one written
// since step 3 (step 6).
func (g *gcRun) recheck(ctx context.Context) error {
	g.prog(Progress{Phase: "recheck"})
	objs, err := g.r.listCommitObjects(ctx)
	if err != nil {
		return fmt.Errorf("gc: recheck: %w", err)
	}
	var fresh []CommitID
	for branch, cs := range objs {
		for _, c := range cs {
			if id := (CommitID{branch, c.seq}); !g.plan.listed[id] {
				fresh = append(fresh, id)
			}
		}
	}
	g.rep.NewCommits = len(fresh)
	if err := forEach(ctx, rootsInFlight, fresh, g.markCommit); err != nil {
		return gcDamaged(err)
	}
	seen := make(map[string]BlobRef, len(g.snaps))
	for _, s := range g.snaps {
		seen[s.Name] = s.Root.Tree
	}
	snaps, err := g.r.readSnapshots(ctx)
	if err != nil {
		return fmt.Errorf("gc: recheck: %w", err)
	}
	var freshSnaps []Snapshot
	for _, s := range snaps {
		if t, ok := seen[s.Name]; !ok || t != s.Root.Tree {
			freshSnaps = append(freshSnaps, s)
		}
	}
	g.rep.NewSnapshots = len(freshSnaps)
	if err := forEach(ctx, rootsInFlight, freshSnaps, g.markSnapshot); err != nil {
		return gcDamaged(err)
	}
	if h := g.opts.hooks; h != nil && h.afterRecheck != nil {
		h.afterRecheck()
	}
	g.rep.TreesRead, g.rep.BlobsMarked = g.w.reads, len(g.w.blobs)
	return nil
}

// countLive counts the marked blobs per pack (the mark is final from here
// on), and the marked packs that do not exist.
func (g *gcRun) countLive(ctx context.Context) error {
	g.live = map[PackID]int{}
	for loc := range g.w.blobs {
		g.live[loc.Pack]++
	}
	for id := range g.live {
		if _, ok := g.packs[id]; ok {
			continue
		}
		if _, err := g.r.store.Stat(ctx, PackKey(id)); errors.Is(err, blobstore.ErrNotFound) {
			g.rep.MissingPacks++
		}
	}
	return nil
}

// sweep deletes the listed packs that nothing marked and that are older
// than the grace period (step 7). A failed delete is counted, not fatal.
func (g *gcRun) sweep(ctx context.Context) error {
	rep := g.rep
	var victims []PackID
	cutoff := g.now.Add(-g.grace - clockSlack)
	for id, p := range g.packs {
		if g.live[id] > 0 {
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
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(g.conc)
	var swept int64
	for _, id := range victims {
		size := g.packs[id].size
		if g.opts.DryRun {
			rep.PacksSwept++
			rep.BytesFreed += size
			continue
		}
		eg.Go(func() error {
			err := g.r.store.Delete(ectx, PackKey(id))
			g.mu.Lock()
			defer g.mu.Unlock()
			if err != nil {
				if ectx.Err() != nil {
					return ectx.Err()
				}
				rep.PackErrors++
				return nil
			}
			rep.PacksSwept++
			rep.BytesFreed += size
			swept++
			g.prog(Progress{Phase: "sweep", Done: swept, Total: int64(len(victims)), Items: rep.BytesFreed})
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("gc: sweep: %w", err)
	}
	return nil
}

// scanPartial reads the footers of the live packs and reports the dead
// bytes of the partially live ones.
func (g *gcRun) scanPartial(ctx context.Context) error {
	rep := g.rep
	var scanned int64
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(g.conc)
	for id := range g.live {
		if _, ok := g.packs[id]; !ok {
			continue
		}
		eg.Go(func() error {
			entries, err := g.r.ReadPackIndex(ectx, id)
			g.mu.Lock()
			defer g.mu.Unlock()
			scanned++
			g.prog(Progress{Phase: "scan", Done: scanned, Total: int64(len(g.live))})
			if err != nil {
				if ectx.Err() != nil {
					return ectx.Err()
				}
				rep.PackErrors++
				return nil
			}
			var dead int64
			for _, e := range entries {
				if _, ok := g.w.blobs[BlobLoc{id, e.Offset}]; !ok {
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
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("gc: scan packs: %w", err)
	}
	return nil
}

// record writes the report as the volume's last gc (gc/last.json) when the
// run applied the volume's own policy and deleted for real.
func (g *gcRun) record(ctx context.Context) error {
	if !g.opts.VolumePolicy || g.opts.DryRun {
		return nil
	}
	if err := g.r.recordGC(ctx, *g.rep); err != nil {
		return fmt.Errorf("gc: record the run: %w", err)
	}
	return nil
}
