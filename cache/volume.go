package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sync/singleflight"

	"github.com/agentfs/agentfs/cache/commit"
	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/cache/ns"
	"github.com/agentfs/agentfs/snapshot"
)

// Options configure Open.
type Options struct {
	// Repo is the opened volume (required).
	Repo *snapshot.Repo
	// CacheDir holds the Badger database and the data files (required).
	// One cache directory serves one volume and branch.
	CacheDir string
	// Branch to mount; default "main".
	Branch string
	// ReadOnly mounts without a writer lease; every change fails with
	// ErrReadOnly. A read-only volume follows its branch head (see
	// FollowInterval).
	ReadOnly bool
	// FollowInterval is how often a read-only volume checks its branch for
	// new commits and moves to the newest. Default 5s; negative disables.
	FollowInterval time.Duration
	// CacheSize bounds the bytes of clean chunks kept in the data files
	// (dirty data is never evicted). Default 10 GiB.
	CacheSize int64
	// CheckpointInterval is how often a dirty volume is committed. Default
	// 5s; a negative value disables automatic checkpoints (Sync and Close
	// still commit).
	CheckpointInterval time.Duration
	// LeaseTTL is how long the writer lease lasts without renewal. Default 30s.
	LeaseTTL time.Duration
	// UploadConcurrency bounds the packs uploaded at once. Default 4.
	UploadConcurrency int
	// ReadAhead is the number of chunks fetched ahead of a sequential
	// reader. Default 4; negative disables read-ahead.
	ReadAhead int
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger
	// Clock returns the current time; default time.Now. Tests inject one.
	Clock func() time.Time
	// Lower is the host directory a virtual workspace over a host directory
	// reads through to; nil otherwise. Its root is the base of the branch's
	// commits that have a root origin.
	Lower Lower
	// Host and MountPoint name this writer in its lease. Host defaults to
	// os.Hostname().
	Host       string
	MountPoint string
}

// volState is the persistent state of a cache directory (key m/state).
type volState struct {
	VolumeID string `json:"volume_id"`
	URL      string `json:"url"`
	Branch   string `json:"branch"`
	// Seq is the commit on Branch that the namespace derives from: the last
	// one this cache committed or loaded.
	Seq uint64 `json:"seq"`
	// Writer is this cache directory's writer ID, recorded in its commits.
	Writer string `json:"writer"`
	// Links is the link table of commit Seq.
	Links *snapshot.BlobRef `json:"links,omitempty"`
	// Virtual is the base of a virtual workspace (nil otherwise), copied
	// into every commit.
	Virtual *snapshot.VirtualBase `json:"virtual,omitempty"`
	// DivergedFrom is set when a lost commit race moved this cache's
	// changes to Branch: the branch it was mounted on.
	DivergedFrom string `json:"diverged_from,omitempty"`
}

// Volume is an opened volume: the engine behind a mount. All methods are
// safe for concurrent use.
type Volume struct {
	opts      Options
	repo      *snapshot.Repo
	chunkSize uint64
	inlineMax uint64 // files up to this size keep their bytes in the database
	db        *meta.DB
	names     *ns.Namespace // namespace changes on db
	files     *data.Files   // the data files
	data      *data.Sources // what open files' data states share (its Cache set with blocks)
	lower     Lower         // the lower layer of a virtual workspace (nil: none)
	log       *slog.Logger
	now       func() time.Time

	cpMu sync.Mutex   // serializes checkpoints
	mu   sync.RWMutex // the namespace: exclusive for changes (and a checkpoint's freeze), shared for reads and data writes (lockData)

	nodesMu sync.Mutex
	nodes   map[uint64]*node         // guarded by nodesMu
	loading map[uint64]chan struct{} // guarded by nodesMu: files being loaded for their first open, closed when done (acquireNode)

	seq atomic.Uint64 // op sequence for tree marks

	inoMu    sync.Mutex
	nextIno  uint64 // guarded by inoMu
	inoLimit uint64 // guarded by inoMu: persisted reservation

	stateMu sync.Mutex
	state   volState // guarded by stateMu

	gens     commit.Gens   // write generations of dirty blocks
	dirty    meta.DirtySet // in-memory mirror of tree marks and dirty files
	markMu   sync.Mutex    // orders mark-writing transactions against a checkpoint's clearing
	notifier Notifier      // guarded by stateMu
	lease    *snapshot.Lease
	fetches  singleflight.Group // tree loads, once for concurrent callers
	fetch    *data.Fetcher      // chunk fetches and the read-ahead bound
	blocks   *data.Cache        // clean blocks' accounting and eviction (set at the end of open)
	stats    commit.Stats       // checkpoints and lease renewals, for Status
	adopted  adoptState         // pinned files' data-file stamps at their last adoption (passthrough.go)
	// adoptHook, for tests, is called by an adoption after it compared
	// each clean block of file ino's data file, with no lock held.
	adoptHook func(ino, b uint64)
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closed    atomic.Bool
	kick      chan struct{}
}

// Meta keys.
var (
	keyState  = meta.MetaKey("state")
	keyClean  = meta.MetaKey("clean")
	keyInoLim = meta.MetaKey("ino")
)

// Open opens (or creates) the cache directory for opts.Repo and branch and
// returns the engine. A fresh cache directory starts from the branch head,
// reading only its root tree. A cache directory left by a crash is recovered:
// everything fsynced before the crash is there. A read-write open takes the
// branch's writer lease and fails with an error matching
// snapshot.ErrLeaseHeld if another live writer has it.
func Open(ctx context.Context, opts Options) (*Volume, error) {
	if opts.Repo == nil || opts.CacheDir == "" {
		return nil, fmt.Errorf("cache.Open: Repo and CacheDir are required: %w", ErrInvalid)
	}
	if opts.Branch == "" {
		opts.Branch = snapshot.DefaultBranch
	}
	if err := snapshot.ValidateName("branch", opts.Branch); err != nil {
		return nil, err
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = 10 << 30
	}
	if opts.CheckpointInterval == 0 {
		opts.CheckpointInterval = 5 * time.Second
	}
	if opts.FollowInterval == 0 {
		opts.FollowInterval = 5 * time.Second
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 30 * time.Second
	}
	if opts.UploadConcurrency <= 0 {
		opts.UploadConcurrency = 4
	}
	if opts.ReadAhead == 0 {
		opts.ReadAhead = 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	if err := os.MkdirAll(opts.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("cache dir %s: %w", opts.CacheDir, err)
	}
	v := &Volume{
		opts:      opts,
		repo:      opts.Repo,
		chunkSize: uint64(opts.Repo.Config().ChunkSize),
		inlineMax: min(InlineMax, uint64(opts.Repo.Config().ChunkSize)),
		log:       opts.Logger.With("volume", opts.Repo.URL(), "branch", opts.Branch),
		now:       opts.Clock,
		nodes:     map[uint64]*node{},
		loading:   map[uint64]chan struct{}{},
		kick:      make(chan struct{}, 1),
	}
	v.ctx, v.cancel = context.WithCancel(context.Background())
	v.fetch = data.NewFetcher(v.ctx, opts.Repo, opts.ReadAhead, 8, v.log)
	files, err := data.NewFiles(filepath.Join(opts.CacheDir, "data"))
	if err != nil {
		return nil, err
	}
	v.files = files
	v.data = &data.Sources{Files: files, BlockSize: v.chunkSize}
	if opts.Lower != nil {
		v.lower, v.data.Lower = opts.Lower, opts.Lower
	}
	bopts := badger.DefaultOptions(filepath.Join(opts.CacheDir, "meta")).
		WithLogger(newBadgerLog(v.log)).
		WithDetectConflicts(false). // Volume's locks serialize writers of a key
		WithNumVersionsToKeep(1).
		WithMemTableSize(32 << 20).
		WithNumMemtables(3).
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		WithValueThreshold(1 << 10).
		WithNumCompactors(2).
		WithSyncWrites(false)
	db, err := badger.Open(bopts)
	if err != nil {
		return nil, fmt.Errorf("open cache database in %s (is another agentfs using this cache dir?): %w", opts.CacheDir, err)
	}
	v.db = meta.NewDB(db, v.log)
	v.names = ns.New(v.db, nsHost{v}, v.repo.EmptyTreeHash())
	if err := v.init(ctx); err != nil {
		v.cancel()
		if v.lease != nil {
			_ = v.lease.Release(context.WithoutCancel(ctx))
		}
		_ = v.db.Close()
		return nil, err
	}
	v.start()
	return v, nil
}

func (v *Volume) init(ctx context.Context) error {
	var st volState
	fresh := false
	err := v.db.View(func(txn *meta.Txn) error {
		it, err := txn.Get(keyState)
		if errors.Is(err, badger.ErrKeyNotFound) {
			fresh = true
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(b []byte) error { return json.Unmarshal(b, &st) })
	})
	if err != nil {
		return fmt.Errorf("read cache state: %w", err)
	}
	cfg := v.repo.Config()
	if !fresh {
		if st.VolumeID != cfg.VolumeID {
			return fmt.Errorf("cache dir %s belongs to volume %s (%s), not %s: use another --cache-dir: %w",
				v.opts.CacheDir, st.VolumeID, st.URL, v.repo.URL(), ErrInvalid)
		}
		want := v.opts.Branch
		if st.Branch != want && st.DivergedFrom != want {
			return fmt.Errorf("cache dir %s holds branch %q, not %q: use another --cache-dir: %w",
				v.opts.CacheDir, st.Branch, want, ErrInvalid)
		}
	} else {
		st = volState{VolumeID: cfg.VolumeID, URL: v.repo.URL(), Branch: v.opts.Branch, Writer: newID()}
	}
	v.state = st

	if err := v.initCounters(); err != nil {
		return err
	}
	maxSeq, err := v.dirty.Load(v.db)
	if err != nil {
		return fmt.Errorf("read cache state: %w", err)
	}
	v.seq.Store(maxSeq)
	if !v.opts.ReadOnly {
		if err := v.acquireLease(ctx); err != nil {
			return err
		}
	}
	if fresh {
		head, err := v.repo.Head(ctx, st.Branch)
		if err != nil {
			return fmt.Errorf("mount branch %q of %s: %w", st.Branch, v.repo.URL(), err)
		}
		if err := v.resetNamespace(ctx, head); err != nil {
			return err
		}
	} else {
		if err := v.recover(); err != nil {
			return err
		}
		if err := v.catchUp(ctx); err != nil {
			return err
		}
	}
	if err := v.loadBlockCache(); err != nil {
		return err
	}
	// Until Close finishes cleanly, the next Open treats this run as a crash.
	return v.db.SyncUpdate(func(txn *meta.Txn) error { return txn.Delete(keyClean) })
}

func newID() string { return hex.EncodeToString(randBytes(8)) }

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// initCounters restores the inode allocator and the op sequence.
func (v *Volume) initCounters() error {
	return v.db.View(func(txn *meta.Txn) error {
		v.nextIno = RootIno + 1
		if it, err := txn.Get(keyInoLim); err == nil {
			_ = it.Value(func(b []byte) error { v.nextIno = meta.U64(b); return nil })
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		v.inoLimit = v.nextIno
		return nil
	})
}

// allocIno returns a fresh inode number. Numbers are reserved in the
// database in batches, so a crash never reuses one.
func (v *Volume) allocIno() (uint64, error) {
	v.inoMu.Lock()
	defer v.inoMu.Unlock()
	if v.nextIno >= v.inoLimit {
		lim := v.nextIno + 4096
		// In Badger before any number is used: a crash must never hand
		// out a number whose data file may exist.
		if err := v.db.SyncUpdate(func(txn *meta.Txn) error { return txn.Set(keyInoLim, meta.Put64(lim)) }); err != nil {
			return 0, fmt.Errorf("reserve inode numbers: %w", err)
		}
		v.inoLimit = lim
	}
	n := v.nextIno
	v.nextIno++
	return n, nil
}

func (v *Volume) saveState(txn *meta.Txn, st volState) error {
	b, _ := json.Marshal(st)
	return txn.Set(keyState, b)
}

func (v *Volume) getState() volState {
	v.stateMu.Lock()
	defer v.stateMu.Unlock()
	return v.state
}

// resetNamespace replaces the whole local namespace with commit c: the root
// and the link table are loaded, everything else loads lazily. Local
// changes are dropped; callers make sure there are none (or that they are
// saved elsewhere).
func (v *Volume) resetNamespace(ctx context.Context, c snapshot.Commit) error {
	var links []snapshot.Entry
	if c.Links != nil {
		b, err := v.repo.ReadBlob(ctx, *c.Links)
		if err != nil {
			return fmt.Errorf("read link table of %v: %w", c.ID, err)
		}
		if links, err = snapshot.DecodeTree(b); err != nil {
			return fmt.Errorf("link table of %v: %w", c.ID, err)
		}
	}
	for _, p := range []byte{meta.PrefixInode, meta.PrefixDentry, meta.PrefixTreeMark, meta.PrefixDirtyFile, meta.PrefixLink, meta.PrefixOrphan, meta.PrefixPresence, meta.PrefixInline} {
		if err := v.db.DropPrefix([]byte{p}); err != nil {
			return fmt.Errorf("reset cache: %w", err)
		}
	}
	v.dirty.Reset()
	if err := v.files.Reset(); err != nil {
		return err
	}
	r := c.Root
	root := &meta.Inode{Ino: RootIno, Type: snapshot.TypeDir, Mode: r.Mode, Uid: r.Uid, Gid: r.Gid,
		Atime: r.Atime, Mtime: r.Mtime, Ctime: r.Ctime, Nlink: max(r.Nlink, 2), Xattrs: r.Xattrs,
		Tree: r.Tree, SubFiles: r.SubFiles, SubBytes: r.SubBytes, HasOrigin: r.HasOrigin, Mod: r.Modified}
	wb := meta.NewBatch(v.db)
	wb.Set(meta.Key64(meta.PrefixInode, RootIno), meta.EncodeInode(root))
	for i := range links {
		e := &links[i]
		if e.LinkID == 0 || e.Type == snapshot.TypeDir {
			return fmt.Errorf("link table of %v: bad entry %q: %w", c.ID, e.Name, snapshot.ErrCorrupt)
		}
		ino, err := v.allocIno()
		if err != nil {
			return err
		}
		wb.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(meta.InodeFromEntry(ino, 0, e, v.inlineMax)))
		wb.Set(meta.Key64(meta.PrefixLink, e.LinkID), meta.Put64(ino))
	}
	v.stateMu.Lock()
	v.state.Branch = c.ID.Branch
	v.state.Seq = c.ID.Seq
	v.state.Links = c.Links
	v.state.Virtual = c.Virtual
	st := v.state
	v.stateMu.Unlock()
	b, _ := json.Marshal(st)
	wb.Set(keyState, b)
	if err := wb.Flush(); err != nil {
		return err
	}
	return v.db.Flush()
}

// recover repairs a cache directory after a crash: orphans are deleted and,
// unless the last run closed cleanly, cached clean blocks are forgotten
// (their data files may hold writes that were never recorded), keeping
// dirty blocks, which are authoritative.
func (v *Volume) recover() error {
	clean := true
	err := v.db.View(func(txn *meta.Txn) error {
		_, err := txn.Get(keyClean)
		if errors.Is(err, badger.ErrKeyNotFound) {
			clean = false
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	var orphans []uint64
	err = v.db.View(func(txn *meta.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{meta.PrefixOrphan}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			orphans = append(orphans, meta.U64(it.Item().Key()[1:]))
		}
		return nil
	})
	if err != nil {
		return err
	}
	wb := meta.NewBatch(v.db)
	for _, ino := range orphans {
		v.dirty.Apply(&meta.Delta{Files: map[uint64]bool{ino: false}})
		wb.Delete(meta.Key64(meta.PrefixOrphan, ino))
		wb.Delete(meta.Key64(meta.PrefixInode, ino))
		wb.Delete(meta.Key64(meta.PrefixDirtyFile, ino))
		wb.Delete(meta.Key64(meta.PrefixPresence, ino))
		wb.Delete(meta.Key64(meta.PrefixInline, ino))
		_ = v.files.Remove(ino)
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	if !clean {
		v.log.Warn("cache was not closed cleanly; recovering", "cache_dir", v.opts.CacheDir)
		if err := v.db.DropPrefix([]byte{meta.PrefixPresence}); err != nil {
			return err
		}
		return v.recoverDataFiles()
	}
	return nil
}

// recoverDataFiles repairs the data files after an unclean close. It
// removes the data file of an inode that has no record: its deletion (or a
// reconcile's drop) reached the database and the crash came before the
// after-flush hook that removes the data file (data.Sources.DropDeleted),
// or the last Close's flush failed with the hook still queued; no record
// names such an inode, so no eviction, open or deletion ever reaches its
// data file again, and this is the one place it goes. And it punches out
// of every data file of a regular file that is not inline whatever lies
// outside its record's dirty blocks: recover has just forgotten every
// present block, and a block that is neither dirty nor present is read
// from the data file as a hole (zeros) or fetched again, so bytes a
// crashed server left there without recording them — a store through a
// passthrough file's shared mapping into a hole that no adoption reached,
// or a write whose dirty mark did not reach the database — must not be
// read back (or committed with a later partial write of the block).
func (v *Volume) recoverDataFiles() error {
	inos, err := v.files.Inodes()
	if err != nil {
		return err
	}
	for _, ino := range inos {
		var r *meta.Inode
		err := v.db.View(func(txn *meta.Txn) error {
			var err error
			r, err = ns.ReadInode(txn, ino)
			return err
		})
		if errors.Is(err, ErrNotFound) {
			// Garbage, and no reason to keep the volume shut: a file
			// that cannot be removed is left for the next recovery.
			if err := v.files.Remove(ino); err != nil {
				v.log.Warn("cannot remove the data file of a gone inode", "inode", ino, "err", err)
			}
			continue
		}
		if err != nil {
			return err
		}
		if r.Type != snapshot.TypeFile || r.Inline {
			continue
		}
		if err := v.files.KeepOnly(ino, r.Dirty, v.chunkSize); err != nil {
			return err
		}
	}
	return nil
}

// acquireLease takes the branch's writer lease.
func (v *Volume) acquireLease(ctx context.Context) error {
	st := v.getState()
	h := snapshot.Holder{ID: st.Writer, Host: v.opts.Host, PID: os.Getpid(), Mount: v.opts.MountPoint, Started: v.now().UTC()}
	l, err := v.repo.AcquireLease(ctx, st.Branch, h, v.opts.LeaseTTL, v.now(), v.staleHolder)
	if err != nil {
		return fmt.Errorf("mount %s branch %q read-write: %w", v.repo.URL(), st.Branch, err)
	}
	v.lease = l
	return nil
}

// staleHolder reports whether a lease holder is a process of this host that
// no longer runs, so its lease need not be waited out.
func (v *Volume) staleHolder(h snapshot.Holder) bool {
	if h.Host != v.opts.Host || h.PID <= 0 {
		return false
	}
	if h.PID == os.Getpid() {
		return h.ID != v.getState().Writer
	}
	err := syscall.Kill(h.PID, 0)
	return errors.Is(err, syscall.ESRCH)
}

// catchUp reconciles the cache with the branch head after a restart: commits
// this cache wrote but did not record (a crash between commit and
// bookkeeping) are adopted; commits by another writer are fast-forwarded to
// when the cache has no changes, and otherwise the cache's changes move to
// a new branch at the next checkpoint.
func (v *Volume) catchUp(ctx context.Context) error {
	st := v.getState()
	head, err := v.repo.HeadSeq(ctx, st.Branch)
	if err != nil {
		if errors.Is(err, snapshot.ErrNoCommits) {
			return fmt.Errorf("branch %q of %s has no commits (was it removed?): %w", st.Branch, v.repo.URL(), err)
		}
		// The store may be unreachable: serve from the cache and retry
		// at the next checkpoint.
		v.log.Warn("cannot read branch head; serving from cache", "err", err)
		return nil
	}
	seq := st.Seq
	for seq < head {
		c, err := v.repo.ReadCommit(ctx, snapshot.CommitID{Branch: st.Branch, Seq: seq + 1})
		if err != nil {
			return fmt.Errorf("catch up with %s: %w", st.Branch, err)
		}
		if c.Writer != st.Writer {
			break
		}
		seq++
	}
	if seq != st.Seq {
		v.log.Info("adopting commits written before a crash", "from", st.Seq, "to", seq)
		if err := v.setSeq(seq); err != nil {
			return err
		}
	}
	if seq == head {
		return nil
	}
	dirty, err := v.hasLocalChanges()
	if err != nil {
		return err
	}
	if dirty {
		v.log.Warn("branch moved on while this cache had unsaved changes; they will be committed to a new branch",
			"branch", st.Branch, "cache_seq", seq, "head", head)
		return nil
	}
	c, err := v.repo.ReadCommit(ctx, snapshot.CommitID{Branch: st.Branch, Seq: head})
	if err != nil {
		return err
	}
	v.log.Info("fast-forwarding to branch head", "from", seq, "to", head)
	return v.resetNamespace(ctx, c)
}

func (v *Volume) setSeq(seq uint64) error {
	v.stateMu.Lock()
	v.state.Seq = seq
	st := v.state
	v.stateMu.Unlock()
	return v.db.SyncUpdate(func(txn *meta.Txn) error { return v.saveState(txn, st) })
}

// hasLocalChanges reports whether anything is waiting to be committed.
func (v *Volume) hasLocalChanges() (bool, error) { return v.dirty.Any(), nil }

// start launches the background work: checkpoints, lease renewal, value-log
// GC. Close stops them.
func (v *Volume) start() {
	if !v.opts.ReadOnly {
		v.wg.Add(2)
		go v.checkpointLoop()
		go v.leaseLoop()
	}
	if v.opts.ReadOnly && v.opts.FollowInterval > 0 {
		v.wg.Add(1)
		go v.followLoop()
	}
	v.wg.Add(2)
	go v.gcLoop()
	go func() {
		defer v.wg.Done()
		v.blocks.Run(v.ctx) // the evict loop
	}()
}

func (v *Volume) leaseLoop() {
	defer v.wg.Done()
	t := time.NewTicker(v.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-v.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(v.ctx, v.opts.LeaseTTL/3)
		err := v.lease.Renew(ctx, v.now())
		cancel()
		if err != nil && v.ctx.Err() == nil {
			err = v.keptLocally(err)
			v.log.Warn("renewing writer lease failed", "err", err)
			v.stats.Lease(err)
		} else if err == nil {
			v.stats.Lease(nil)
		}
	}
}

func (v *Volume) gcLoop() {
	defer v.wg.Done()
	t := time.NewTicker(5 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-v.ctx.Done():
			return
		case <-t.C:
		}
		for v.ctx.Err() == nil && v.db.RunValueLogGC(0.5) == nil {
		}
	}
}

// Close commits everything (unless read-only), stops the background work,
// releases the writer lease and closes the cache database. If the final
// commit fails (the store is unreachable), Close still closes the cache and
// returns the error: nothing is lost, the next Open uploads it.
func (v *Volume) Close(ctx context.Context) error {
	if !v.closed.CompareAndSwap(false, true) {
		return nil
	}
	var errs []error
	if !v.opts.ReadOnly {
		if err := v.checkpoint(ctx, "close", ""); err != nil {
			errs = append(errs, fmt.Errorf("final commit: %w", err))
		}
	}
	v.cancel()
	v.wg.Wait()
	v.fetch.Wait()
	v.nodesMu.Lock()
	nodes := make([]*node, 0, len(v.nodes))
	for _, n := range v.nodes {
		nodes = append(nodes, n)
	}
	v.nodesMu.Unlock()
	for _, n := range nodes {
		n.mu.Lock()
		if err := v.persistNode(n); err != nil {
			errs = append(errs, err)
		}
		n.closeFile()
		n.mu.Unlock()
	}
	if v.lease != nil {
		if err := v.lease.Release(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := v.db.Update(func(txn *meta.Txn) error { return txn.Set(keyClean, nil) }); err != nil {
		errs = append(errs, err)
	}
	if err := v.db.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
