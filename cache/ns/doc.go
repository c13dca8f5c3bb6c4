// Package ns is the namespace of the agentfs engine (package cache): the
// changes to it — create, link, remove, rename, attributes, extended
// attributes — and its reads — lookup, stat, readlink, readdir, extended
// attributes — as record logic over the metadata database (cache/meta).
//
// A change (Change, run by Namespace.Change) is one transaction of the
// database: it reads records through itself (an open file's in-memory
// record, whose lock it then holds to its end, or the stored one), changes
// private copies, collects the directories whose trees must be rewritten
// (tree marks) and the dirty-set changes, and installs everything when the
// transaction commits. A read (read.go) runs in a transaction of its own
// and reads an open file's record from memory (Host.ViewOpen), under the
// record's lock held shared; stat's view of a record is Attr (AttrOf).
// What it needs of the engine is Host: the open files and their locks,
// the lower layer's Mod flag, inode numbers, the clock, the commit of
// marks under the lock that orders mark writers, and the release of a
// deleted inode's data.
//
// It is a package of its own on top of cache/meta rather than part of it:
// meta is the database, its records and the dirty set, with no lock and no
// notion of an operation, and is read as such by the committer and the
// data side; ns is what a namespace operation does to those records, with
// the engine behind an interface. It knows nothing of data files, of the
// blob store or of the engine's locks: the caller holds the namespace lock
// (cache's Volume.mu, one lock: see cache/doc.go) exclusively for the
// whole of a change, and at least shared for a read. It never imports
// package cache, cache/data or cache/commit.
//
// A change or a lookup in a directory of the base commit that is not
// loaded yet fails with *NotLoadedError; the caller loads it and retries. Loading
// (Namespace.ToLoad, then InstallDir) writes the records of the
// directory's entries, which the caller read from the directory's tree or
// the lower layer's listing: this package reads no tree.
//
// Errors are this package's kinds (ErrNotFound, ...); package cache
// returns them under the same names.
package ns
