// Package cache is the local side of a mounted agentfs volume: the engine
// that the FUSE layer (fs/) drives through an inode-level API, testable
// without a kernel mount.
//
// It owns, in a cache directory:
//   - a Badger database, behind an in-memory write-behind layer and read
//     cache (cache/meta), with the live namespace: inode records (attributes,
//     chunk maps, dirty blocks), dentries, the set of directories whose
//     trees must be rewritten, hard-link groups, and the volume's state (the
//     branch and the commit the namespace derives from);
//   - data files, one per regular file that has local bytes: written data
//     lands there first (write-back), and chunks fetched from the blob store
//     are kept there (the block cache, size-bounded, least recently used
//     first);
//   - the checkpointer, which uploads dirty chunks in packs, writes the
//     changed directory trees and commits them (see checkpoint.go and
//     cache/commit).
//
// A data file outlives its inode's record only briefly. A deleted file's
// (a closed file's last unlink, an orphan's last release, an inode a
// reconcile drops) is removed once the deletion is in Badger
// (data.Sources.DropDeleted, through meta.DB.AfterFlush): until then a
// crash brings the file back and it needs its bytes. So an eviction never
// removes the data file of an inode without a record
// (data.Sources.EvictClosed): that deletion may not be durable yet. A
// crash between the deletion's flush and the removal, or a Close whose last
// flush fails, leaves a data file no record names, which no eviction, open
// or deletion reaches again; the recovery after an unclean close removes
// it (recoverDataFiles, volume.go), the one scan of the data files. A clean
// close leaves none (its flush runs the removals).
//
// Parts. The engine is being split into packages under cache/ along its
// lock order (issue 16); Volume stays the facade that fs/ calls. Split off
// so far:
//   - cache/data, the data side: the data files, the block cache's
//     accounting, eviction policy and evict loop, chunk fetches (once for
//     concurrent readers), making a block of an open file present (fetched
//     without the file's lock, installed under it unless it changed
//     meanwhile), a read of an open file (data.Fetcher.Read: its remote
//     blocks fetched first, its data and origin files opened, and after
//     a sequential read the read-ahead it starts), the blocks
//     a write or a truncation covers in part made local before the write's
//     lock is taken (Fetcher.LockToWrite, LockToCut), read-ahead in the
//     background with its window and bound, the presence record's
//     encoding, and data.File, an open file's local data state (present
//     blocks, local bytes, its origin file in the lower layer, its
//     passthrough pins) with where each block's bytes come from
//     (dirty or present, the store, the lower, a hole), reading and
//     writing them, installing fetched and copied-up blocks, cutting them
//     (truncation), evicting them, forgetting them (an origin that
//     changed), blocks a commit made clean becoming present (AddPresent),
//     the blocks a reconcile changes under the file dropped (Replace),
//     what of its records must be persisted, the block cache's count of
//     its blocks, and a pinned data file kept whole (pin.go).
//     What a volume's files share (data files, block cache, the lower as a
//     block source: data.Origins) is a data.Sources, which also drops a
//     closed file's clean blocks (records first) and a deleted file's
//     data. It knows no namespace: it reads a file's record through
//     data.Layout (meta.FileLayout), locks an open file and holds it open
//     through data.Held (node here), writes its two records through
//     data.Records and loads them through data.Stored (meta.FileRecords,
//     a transaction; data.StoredPresence reads a presence record, also for the
//     block cache's count at open, loadBlockCache in blockcache.go, and a
//     closed file's eviction, which reads and deletes its records in one
//     transaction: data.Sources.EvictClosed), reaches back
//     through data.Evictor (blockcache.go here: which file is open, its
//     locks and records) and reads chunks through data.ChunkSource (the
//     repo).
//   - cache/meta, the metadata database: Badger behind the write-behind
//     layer and the read cache (meta.DB, its transactions), the key layout
//     and the inode and dentry records with their encoding, a directory's
//     listing (meta.ReadDir: ns's readdir, the Reconciler's and the
//     Builder's), and the dirty set (the in-memory mirror of tree marks
//     and dirty files, changed by a meta.Delta after its transaction
//     commits). It imports
//     neither this package nor cache/data, and knows no lock of the
//     engine: the facade orders mark writers with markMu (marks.go).
//   - cache/ns, the namespace on top of cache/meta: a change
//     (ns.Change: one transaction, records read through it and installed
//     at its commit, its tree marks and dirty-set delta) and the record
//     logic of create, link, remove (dropName: orphans, deletion), rename,
//     attributes and extended attributes, and the records a base
//     directory's lazy load writes (ns.Namespace.ToLoad and InstallDir:
//     the stale keys of an interrupted load removed, a hard-link group's
//     names, the Loaded flag last), and the reads: lookup, stat (ns.Attr,
//     the stat view of a record), readlink, readdir, extended attributes
//     and the free inodes of statfs, an open file's record read from
//     memory. It reaches the engine through ns.Host (nsHost in
//     namespace.go: open files' records under node.mu, the lower's Mod
//     flag, inode numbers, the clock, the commit of marks under markMu, a
//     deleted inode's data) and runs with Volume.mu held (shared by the
//     reads); a base directory not loaded yet is an ns.NotLoadedError, which the
//     facade loads and retries (retryLoad). The namespace's error kinds
//     are its own; this package returns them under the same names.
//   - cache/commit, the committer, so far the parts of a checkpoint that
//     need only records and the store: the Uploader (one checkpoint's
//     blobs, packed by type and uploaded in the background through
//     snapshot, and the captured copy of each dirty block), Gens (the
//     write generation of each dirty block, bumped by writes here), the
//     Builder (which directories a checkpoint rebuilds, deepest first:
//     Plan; trees, file entries, the link table and the root, from meta
//     records; it reads an open file's record back through Record, recOf
//     here; the rebuilt directories' records apply writes: DirRecords,
//     ApplyTrees),
//     the Capture (a file's dirty blocks read into the Uploader through
//     commit.File, which node implements here; the blocks a commit covers
//     and the records apply writes for them: Clean, Cover), the Applier
//     (phase D: each file with captured blocks held through commit.Files —
//     an open file's node locked, a closed file's node read from its
//     records: heldFile in checkpoint.go — its covered blocks made clean,
//     an open file's in a transaction of its own, the others in one
//     meta.Batch; then the directories' trees and the covered marks
//     cleared under markMu, and the volume's state), Diverge (a
//     commit that lost its number saved on a new branch; moving the volume
//     there, its state and lease, is here), Stats (the checkpoints'
//     figures for Status) and the Reconciler (another commit's link table
//     and tree applied to the live namespace, on a switch, a restore or a
//     read-only volume's follow: the walk of the trees and the records it
//     writes; what it needs beyond records it asks through commit.Live,
//     which reconcile.go implements here: inode numbers, the lower's
//     listings, a file held as for apply (commit.Files, which commit.Live
//     embeds), which the Reconciler brings to its new entry with its
//     local bytes (data.File.Replace drops what changed), the data side's
//     adapters of a record and a transaction, a pinned file's fetch and
//     refill, an open file made an orphan, the data of a dropped inode).
//     Its ErrInconsistent is reported here as ErrIO.
//
// The lower layer of a virtual workspace is an interface here (Lower, in
// lower.go): overlay.HostDir implements it, and what reading through a
// host directory lists and resolves is overlay's. The engine keeps what
// the lower's listings, attributes and bytes mean for its own state. In
// lower.go: whether there is a lower (readsThrough) and the Mod flag that
// records what differs from it (markModified), a directory's entries read
// from the lower (dirEntries), the refresh of an unchanged file from it
// (refreshOrigin). For the data side the lower is a block source
// (data.Origins, in data.Sources): data.File opens a file's origin, reads
// it and copies up its blocks.
//
// Still here: of the namespace, the facade's methods (namespace.go: one
// per operation, which checks what fs/ passes, takes Volume.mu and calls
// ns; a read of a directory not loaded yet loads it and retries), of the
// lazy load of base
// directories the reading of a tree (from the store or the lower), once
// for concurrent callers, and its locking (load.go), and the writes of
// marks (marks.go); the open files
// (file.go: node, its record and its data.File under one lock, which it
// lends to data.Fetcher as a data.Held; a file's first open loaded by one
// opener while the others wait, acquireNode; Read, Write and truncation as
// thin calls of the Fetcher, and of write-back and truncation what needs the
// namespace: the record's dirty marks, size and times, its persistence
// before bytes land; of passthrough, passthrough.go, the record's side:
// adopted blocks made dirty and their generations, a refilled file's
// presence persisted), and the rest of the committer: a checkpoint's
// phases, which files a capture reads, the freeze, a file held for the
// committer (heldFile, holdFile: checkpoint.go), the switch to a commit,
// the committer's hooks (live: commit.Live and commit.Files) and
// following a branch (reconcile.go), and history (history.go).
//
// The namespace lock (Volume.mu) stays one lock after the split. It is
// taken
//   - exclusively by every namespace change (ns.Change, whole), a base
//     directory's install (load.go), a switch's reconcile, a checkpoint's
//     freeze (phase B) and apply (phase D), an orphan's deletion at its
//     last release and the eviction of a closed file;
//   - shared by the reads (lookup, stat, readlink, readdir, xattr reads,
//     statfs), the record read before a load, an open (acquireNode), a
//     last release (releaseNode persists the record and unpublishes the
//     node under it, so a change sees either the open node or the stored
//     record), and whatever dirties an open file's blocks or changes its
//     size (lockData: writes, truncations, AdoptPinned's marking of the
//     blocks its hash found changed), so that a freeze
//     is a cut no write crosses (TestCheckpointWhileWriting,
//     TestCheckpointSizeMatchesChunk);
//   - not at all by reads of an open file's bytes, its fsync and the
//     persisting of its record (node.mu, then markMu for its marks),
//     AdoptPinned's reading and hashing of a pinned data file (node.mu
//     shared only to note its blocks' records before, lockData to mark
//     after, with each record checked again: passthrough.go), fetches,
//     the tree fetch of a load, and a checkpoint's uploads (phases A
//     and C).
//
// Changes stay under one exclusive hold because meta.Txn detects no
// conflicts (the write-behind layer commits without checking), so two
// changes that may touch one key must be ordered by a lock of the engine,
// and a change's keys are not known before it runs: a rename reads every
// ancestor of its target directory (checkNotAncestor), a link or unlink
// reaches the link table and a hard-link group's records, create, link,
// remove and rename write their directories' times (and Nlink, for a
// subdirectory), and which directories must be loaded first shows only
// as the change runs (ns.NotLoadedError, then a retry). A checkpoint's
// freeze needs a cut no change crosses: it persists open files, captures
// their blocks and reads every marked directory's records under the same
// exclusive hold. Per-directory locks would need all of: a rename-wide
// lock for cross-directory renames (as the kernel's own), the locks of a
// change taken in inode order once its keys are known (a first read-only
// pass, or a retry on a conflict that meta.Txn would have to start
// detecting), the link table as a lock of its own, and freeze as a writer
// over all of them. That is a redesign of the engine's concurrency with
// its own tests, not a move; and no measurement yet says the lock is
// contended (the kernel already serializes changes within one directory).
//
// Reads of several keys need the shared hold: a transaction reads each key
// as last committed (meta.Txn is no snapshot), and a lookup reads three
// (the directory's record, the dentry, the child's record), a readdir the
// directory's record and its dentries; without the lock a lookup racing an
// unlink could find a dentry whose inode has no record any more. Where the
// split makes taking the lock apart safe: the reads of one record (stat,
// readlink, xattr reads, statfs) would be correct without it, since ns
// reads the stored record as one key and an open file's record only
// through ns.Host.ViewOpen, under node.mu, which every writer of that
// record holds (a change from LockOpen to its install, a write, a last
// release until the record is persisted). They still take it shared, to
// change no behaviour in this split: dropping it would let a stat pass a
// long exclusive hold (a freeze, a switch, a large directory's install),
// which wants a measurement of its own first.
//
// Directories of the base commit load lazily, on first lookup or readdir, so
// opening a volume of any size reads one tree.
//
// Errors are this package's own kinds (ErrNotFound, ErrExists, ...), mapped
// to errno in fs/ alone. This package never imports fs/, overlay/ or FUSE.
//
// Lock order: Volume.cpMu (checkpoints) → data.Cache's evictMu
// (evictions, never taken with cpMu) → Volume.mu (namespace) → node.mu
// (one file's data state) → Volume.markMu (transactions that write tree
// marks) → the cache database's own locks (meta.DB's flushMu → mu → rcMu).
// An opener waits for another's load of the same file (acquireNode)
// holding Volume.mu shared (and cpMu, a checkpoint's capture), neither of
// which the load takes again. Volume.nodesMu, stateMu, the dirty set's
// mutex, data.Cache's mu and cache/commit's (Gens', Stats', and the
// Uploader's, under which Add may wait for an upload slot) are leaves: no
// other lock is acquired while one is held. Per package:
// cache/data holds evictMu for a whole eviction, during which it calls the
// Evictor (which takes Volume.mu, node.mu and the database, in that order),
// and never calls out with its mu held; cache/meta takes no lock of the
// engine and calls out only to AfterFlush hooks, with its flushMu held;
// cache/ns has no lock of its own: a change, run under Volume.mu, takes
// node.mu (ns.Host.LockOpen) and then markMu (ns.Host.CommitMarked)
// through its Host; cache/commit's Applier, run under Volume.mu, takes
// node.mu (commit.Files.Hold) and markMu (Files.Update, Applier.Marks),
// one file's lock at a time and markMu after it, and reads the rebuilt
// directories' records (Builder.Record: recOf, node.mu shared for an open
// file) before it takes markMu for their trees, under which it takes no
// other lock of the engine (a directory is never an open file — nodes
// are regular files, loadNode, and inode numbers are never reused — so
// recOf would take none there anyway); its Reconciler, under Volume.mu
// too, holds one file at a time (Files.Hold: node.mu) and takes markMu
// within it (Files.Update; a pinned file's refill persists the node);
// data.Fetcher.Read takes
// node.mu (through data.Held) and LockToWrite and LockToCut the lock the
// facade gives them (dataLock: Volume.mu shared, then node.mu), never
// while a chunk is fetched.
package cache
