// Package snapshot owns the on-blob format of an agentfs volume — the truth of
// a workspace — as FORMAT.md documents it: volume.json, packs of
// content-addressed blobs (file chunks and directory trees), numbered commits
// on branches, named snapshots and writer leases.
//
// Everything here is immutable once written, except four small mutable
// objects: a branch's head hint (a cache, always verified), a writer's
// lease, the volume's retention policy (retention.json) and the record of
// the last gc that applied it (gc/last.json). A commit is written with a conditional create only after
// every object it references is stored, so a reader never meets a commit
// whose trees or chunks are missing.
//
// This package knows nothing of inodes, FUSE, or the local cache: it reads
// and writes objects through a *blobstore.Store and returns its own error
// kinds (ErrNoVolume, ErrCorrupt, ErrCommitExists, ...). It must never import
// cache/, overlay/, fs/ or anything above them.
package snapshot
