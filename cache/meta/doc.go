// Package meta is the namespace side of the agentfs engine (package
// cache): its metadata database and the records in it.
//
//   - DB (kv.go): Badger behind an in-memory write-behind layer (the
//     pending table, flushed a few milliseconds later as one transaction
//     that keeps the commits' order) and a read cache of inode records and
//     dentries, with transactions (Txn) that read through all three, and
//     batches of many writes (Batch, batch.go: a commit every so many).
//   - The records (record.go): the key layout, the inode record (Inode) and
//     its encoding, dentries and a directory's listing (ReadDir), and the
//     conversions between a record and a tree entry of the snapshot format.
//   - The adapters the data side reads a regular file through (filedata.go):
//     its inode record as a data.Layout (FileLayout) and its two data
//     records, inline bytes and presence, as opaque values under their keys
//     in a transaction (FileRecords: data.Records and data.Stored). Package
//     cache checks that they implement data's interfaces; the facade and
//     cache/commit's tests share them.
//   - DirtySet (dirty.go): the in-memory mirror of the tree marks
//     (directories whose trees must be rewritten) and the dirty-file index,
//     changed by a Delta once the transaction that wrote the keys commits.
//
// It is named after what it holds: the cache directory's metadata
// database ("meta" on disk) and its records. The namespace changes
// themselves (create, link, remove, rename, attributes, a base
// directory's load) and its reads (lookup, stat, ...) are cache/ns's, on
// top of this package, under package cache's namespace lock. It knows
// nothing of data files, of the blob store
// or of the engine's locks, and never imports package cache or cache/data;
// of package snapshot it uses only the tree-entry types and their encoding.
//
// Invariants, checked by DB.CheckInvariants and DirtySet.CheckInvariants
// (the engine's model test calls both after every step):
//   - every key in the pending or in-flight table is read as its last write
//     there; a read-cache entry equals what Badger holds once the tables
//     are flushed;
//   - the dirty set holds exactly the tree marks and dirty-file keys of the
//     database.
//
// Lock order: DB.flushMu → DB.mu → DB.rcMu; DirtySet's mutex is a leaf.
// Callers order transactions that write marks among themselves (in cache:
// Volume.markMu), since Txn detects no conflicts.
package meta
