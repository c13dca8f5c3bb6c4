// Package data is the data side of the agentfs engine (package cache): the
// data files that hold a regular file's local bytes, the accounting,
// eviction policy and evict loop of the block cache and its bound on the
// files pinned for passthrough (Cache.Pin), the fetching of chunks
// from the store (once for concurrent readers), making a block of an open
// file present (Fetcher.Block: the chunk fetched without the file's lock,
// installed under it unless the block changed meanwhile), reading an open
// file (Fetcher.Read: its remote blocks made present first, its data and
// origin files opened as needed), making local, before a write or a
// truncation, the blocks it covers in part (Fetcher.LockToWrite,
// LockToCut, which return holding the writer's lock), read-ahead in
// the background after a sequential read, started by Fetcher.Read, with a
// bound on the fetches at once,
// the encoding of a file's presence record (which clean blocks it holds),
// and File, one open file's local data state: its present blocks, its local
// bytes, its origin file in the lower layer and its passthrough pins, where
// each block's bytes come from (local, the store, the lower, a hole),
// reading and writing them, installing fetched or copied-up blocks,
// cutting, evicting and forgetting them, blocks a commit made clean kept as
// cache (AddPresent), the local bytes of blocks that changed under the file
// dropped (Replace), keeping a pinned data file whole
// (pin.go), with the block cache's count of them kept as they change. The
// Files of one volume share a Sources: the data files, the block cache and
// the lower layer as a block source (Origins), from which a File opens its
// origin itself; it also drops the clean blocks of a closed file (its
// records first) and the data of a deleted one.
//
// It knows nothing of the namespace: a file is an inode number, a block is
// an index, and which blocks are dirty or committed, the file's size and
// how much of it reads through to an origin are the record's, read through
// Layout. What else it needs from the rest of the engine it asks through
// interfaces: Held is an open file's lock, record and hold on it (what
// Fetcher.Block, Read and read-ahead lock and read), an Evictor drops one file's
// clean blocks when the cache is over its limit, a ChunkSource (the
// snapshot repository) supplies a chunk's bytes, Origins (the lower layer)
// opens a file's origin, and Records stores a File's inline bytes and
// presence record, Stored reads them back (Sources.LoadFile,
// StoredPresence: a transaction of the caller's database). It never
// imports package cache.
//
// Lock order: Cache.evictMu (one eviction at a time) → whatever the
// Evictor takes (in cache: Volume.mu, node.mu, the database) → Cache.mu.
// Cache.mu is a leaf: nothing is acquired while it is held, and the Evictor
// is never called with it held. A File has no lock of its own: the caller
// guards it with the lock of the file's record (cache's node.mu), which
// Fetcher.Block and Fetcher.Read take themselves through Held (never while
// fetching a chunk; LockToWrite and LockToCut take the lock their caller
// gives them, which takes the file's), as does a read-ahead fetch, whose end (Held.Release) may close the file
// (in cache: Volume.mu, then node.mu). File.NoteRead may evict in its
// caller (Cache.Access), who holds no lock.
package data
