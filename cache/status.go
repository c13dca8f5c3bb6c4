package cache

import (
	"context"
	"time"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/cache/ns"
	"github.com/agentfs/agentfs/snapshot"
)

// Status describes a volume's state, for `agentfs status`.
type Status struct {
	URL      string `json:"url"`
	VolumeID string `json:"volume_id"`
	Branch   string `json:"branch"`
	// DivergedFrom names the branch this volume was mounted on when a lost
	// commit race moved its changes to Branch.
	DivergedFrom string `json:"diverged_from,omitempty"`
	ReadOnly     bool   `json:"read_only"`
	// HeadSeq is the last commit this volume wrote or loaded.
	HeadSeq uint64 `json:"head_seq"`
	// DirtyDirs counts directories whose trees wait to be rewritten,
	// DirtyFiles files with blocks waiting to upload, DirtyBytes an upper
	// bound of those blocks' bytes.
	DirtyDirs  int   `json:"dirty_dirs"`
	DirtyFiles int   `json:"dirty_files"`
	DirtyBytes int64 `json:"dirty_bytes"`
	// CacheBytes is the size of clean cached chunks; CacheLimit its bound.
	CacheBytes int64 `json:"cache_bytes"`
	CacheLimit int64 `json:"cache_limit"`
	// PinnedFiles counts the files pinned for FUSE passthrough (PinLocal),
	// PinnedBytes their clean cached bytes (counted in CacheBytes too).
	PinnedFiles int   `json:"pinned_files"`
	PinnedBytes int64 `json:"pinned_bytes"`
	OpenFiles   int   `json:"open_files"`
	// Last checkpoint.
	LastCheckpoint    time.Time     `json:"last_checkpoint,omitempty"`
	LastCheckpointDur time.Duration `json:"last_checkpoint_ns"`
	LastError         string        `json:"last_error,omitempty"`
	LastPuts          int64         `json:"last_puts"`
	LastUploadBytes   int64         `json:"last_upload_bytes"`
	Commits           int64         `json:"commits"`
	// Lease is this writer's lease holder, and LeaseError the last renewal
	// failure.
	Lease      *snapshot.Holder `json:"lease,omitempty"`
	LeaseError string           `json:"lease_error,omitempty"`
	CacheDir   string           `json:"cache_dir"`
}

// Status returns the volume's current state.
func (v *Volume) Status(ctx context.Context) (Status, error) {
	st := v.getState()
	s := Status{
		URL: v.repo.URL(), VolumeID: st.VolumeID, Branch: st.Branch, DivergedFrom: st.DivergedFrom,
		ReadOnly: v.opts.ReadOnly, HeadSeq: st.Seq, CacheLimit: v.opts.CacheSize, CacheDir: v.opts.CacheDir,
	}
	if v.blocks != nil {
		s.CacheBytes = v.blocks.Used()
		s.PinnedFiles, s.PinnedBytes = v.blocks.Pinned()
	}
	cp := v.stats.Report()
	s.LastCheckpoint, s.LastCheckpointDur, s.LastError = cp.Last, cp.LastDur, cp.LastErr
	s.LastPuts, s.LastUploadBytes, s.Commits, s.LeaseError = cp.Puts, cp.Bytes, cp.Commits, cp.LeaseErr
	if v.lease != nil {
		h := v.lease.Holder()
		s.Lease = &h
	}
	v.nodesMu.Lock()
	s.OpenFiles = len(v.nodes)
	v.nodesMu.Unlock()
	s.DirtyDirs, s.DirtyFiles = v.dirty.Counts()
	files := v.dirty.FileList()
	err := v.db.View(func(txn *meta.Txn) error {
		for _, ino := range files {
			if r, err := ns.ReadInode(txn, ino); err == nil {
				s.DirtyBytes += int64(len(r.Dirty)) * int64(v.chunkSize)
			}
		}
		return nil
	})
	return s, err
}
