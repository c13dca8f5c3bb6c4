// Package data is the data side of the agentfs engine (package cache): the
// data files that hold a regular file's local bytes, the accounting and
// eviction policy of the block cache, the fetching of chunks from the store
// (once for concurrent readers) and the bound on read-ahead, and the
// encoding of a file's presence record (which clean blocks it holds), and
// File, one open file's local data state: its present blocks, its local
// bytes and its origin file in the lower layer, where each block's bytes
// come from (local, the store, the lower, a hole), reading and writing
// them, installing fetched or copied-up blocks, cutting and evicting them,
// with the block cache's count of them kept as they change. The Files of
// one volume share a Sources: the data files, the block cache and the
// lower layer as a block source (Origins), from which a File opens its
// origin itself.
//
// It knows nothing of the namespace: a file is an inode number, a block is
// an index, and which blocks are dirty or committed, the file's size and
// how much of it reads through to an origin are the record's, read through
// Layout. What else it needs from the rest of the engine it asks through
// interfaces: an Evictor drops one file's clean blocks when the cache is
// over its limit, a ChunkSource (the snapshot repository) supplies a
// chunk's bytes, Origins (the lower layer) opens a file's origin, and
// Records stores a File's inline bytes and presence record (a transaction
// of the caller's database). It never imports package cache.
//
// Lock order: Cache.evictMu (one eviction at a time) → whatever the
// Evictor takes (in cache: Volume.mu, node.mu, the database) → Cache.mu.
// Cache.mu is a leaf: nothing is acquired while it is held, and the Evictor
// is never called with it held. A File has no lock of its own: the caller
// guards it with the lock of the file's record (cache's node.mu).
package data
