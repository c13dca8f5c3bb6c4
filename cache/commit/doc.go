// Package commit is the committer of the engine (cache.Volume): what turns
// the local changes of a volume into a commit, and another commit into
// the live namespace. So far it holds the parts that need only records and
// the store, and the reconciler, which reaches the rest through Live:
//   - the Uploader (upload.go): one checkpoint's blobs, packed by type and
//     uploaded in the background through snapshot.Repo.PutPack, the
//     captured copy of each dirty block (its generation, its reference or
//     a hole), and the check that a slow checkpoint's packs survived gc
//     (snapshot.Repo.HasPack);
//   - Gens (gens.go): the write generation of each dirty block, which
//     decides whether a captured copy is still current;
//   - the Builder (tree.go, plan.go): which directories a checkpoint
//     rebuilds (the marked ones, the parents of dirty files, their
//     ancestors: Plan), a changed directory's tree, a file's entry with its
//     captured blocks, the link table and the commit's root, from meta
//     records read in the caller's transaction;
//   - the Capture (capture.go): reading a file's dirty blocks into the
//     Uploader, block by block while it may be written (phase A) or whole
//     under the frozen namespace (phase B), and, once the commit is
//     written, which captured blocks it covers in a file's record (Clean)
//     and the write that stores that (Cover, apply.go);
//   - phase D (Applier, apply.go): each file with captured blocks held
//     through Files (an open file locked, the others kept still by the
//     namespace lock) and its covered blocks made clean (Cover) — an open
//     file's in a transaction of its own before its lock is released, the
//     others in one meta.Batch — with their bytes kept as cache
//     (data.File.AddPresent); then the rebuilt directories' records read
//     (Builder.DirRecords, before the mark lock: Record may take an open
//     file's lock, which comes first) and, under the facade's mark lock,
//     written with their built trees and the tree marks the commit covers
//     cleared in the same write (ApplyTrees), and the volume's state last;
//   - Diverge (diverge.go): a commit that lost its number to another
//     writer, saved as the first commit of a new branch;
//   - Stats (stats.go): what the last checkpoint and lease renewal did,
//     for the volume's status;
//   - the Reconciler (reconcile.go): another commit's link table and tree
//     applied to the live namespace (switch, restore, follow), keeping
//     every inode number of a path that stays, and what the kernel must
//     be told; a file whose entry changed is held as phase D holds its
//     files (Live embeds Files) and brought to its new entry with its
//     local bytes (data.File.Replace drops the blocks whose chunk changed;
//     a pinned file's are fetched again and refilled); what is not records
//     (inode numbers, the lower's listings, the open files, the data
//     side's record adapters and fetches) it reaches through Live.
//
// The facade (package cache) implements File for its open files (a node:
// its record and local bytes under its lock) and for a file read from its
// records; it reads its open files' records for the Builder through
// Builder.Record. It implements Files (a file held: HeldFile, and the
// mark-ordered Update) for the Applier, and Live, which embeds Files, for
// the Reconciler.
// It still runs the checkpoint's phases (which files, the freeze, phase D
// under the namespace lock), the switch (the namespace lock around
// Reconcile, the marks cleared after it) and history. See
// cache/checkpoint.go for the phases and cache/doc.go for the lock order.
//
// This package never imports the facade (package cache), fs, overlay,
// serve or cmd, and outside its tests not blobstore: it writes and checks
// packs through snapshot.Repo (depguard rules cache-commit and
// cache-commit-code). It takes no lock of the engine: the Uploader's,
// Gens' and Stats' mutexes are leaves, and the Builder and the Reconciler
// run under the namespace lock that their caller holds, as does the
// Applier (the Live and Files methods, and Applier.Marks, take what comes
// after it in the facade's lock order: a file's lock, the mark lock). Its
// one error kind,
// ErrInconsistent, the facade reports as cache.ErrIO.
package commit
