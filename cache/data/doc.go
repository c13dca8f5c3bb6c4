// Package data is the data side of the agentfs engine (package cache): the
// data files that hold a regular file's local bytes, the accounting and
// eviction policy of the block cache, the fetching of chunks from the store
// (once for concurrent readers) and the bound on read-ahead, and the
// encoding of a file's presence record (which clean blocks it holds).
//
// It knows nothing of the namespace: a file is an inode number, a block is
// an index, and what a block's bytes are (dirty, present, remote, from a
// lower layer) is the caller's business. What it needs from the rest of the
// engine it asks through two interfaces: an Evictor drops one file's clean
// blocks when the cache is over its limit, and a ChunkSource (the snapshot
// repository) supplies a chunk's bytes. It never imports package cache.
//
// Lock order: Cache.evictMu (one eviction at a time) → whatever the
// Evictor takes (in cache: Volume.mu, node.mu, the database) → Cache.mu.
// Cache.mu is a leaf: nothing is acquired while it is held, and the Evictor
// is never called with it held.
package data
