package snapshot

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentfs/agentfs/blobstore"
)

// A writer holds a Repo for as long as it runs, and the store under it can
// change meanwhile: a file:// directory moved away or its filesystem
// unmounted (leaving an empty directory), a bucket deleted and recreated,
// another volume initialized at the URL. Writing there would put commits
// and leases into a stranger (and a later return of the original would
// skip them), so every write that moves a ref (a commit, a branch's head,
// a snapshot, a lease) first checks with CheckVolume that volume.json
// still names the volume this Repo opened. That is one GET of a small
// object per commit and per lease renewal.

// VolumeChangedError is returned (matching ErrVolumeChanged) when the store
// no longer holds the volume a Repo opened.
type VolumeChangedError struct {
	URL   string // the store URL, without credentials
	Want  string // the volume ID the Repo opened
	Found string // what the store holds now, e.g. "no volume.json" or "volume 1f2e..."
}

func (e *VolumeChangedError) Error() string {
	return fmt.Sprintf("store %s no longer holds volume %s: found %s (was the store directory moved, "+
		"or its filesystem unmounted, or the bucket deleted and recreated?); writing nothing there until it does",
		e.URL, e.Want, e.Found)
}

// Is matches ErrVolumeChanged.
func (e *VolumeChangedError) Is(target error) bool { return target == ErrVolumeChanged }

// CheckVolume verifies that the store still holds the volume r opened: that
// volume.json exists and names r's volume ID. It returns nil if so, a
// *VolumeChangedError (matching ErrVolumeChanged) if volume.json is
// missing, unreadable or names another volume, and the store's error,
// wrapped, if volume.json could not be read (the store is unreachable).
// Writers call it before each write that moves a ref; it costs one GET.
func (r *Repo) CheckVolume(ctx context.Context) error {
	b, err := r.store.Get(ctx, VolumeKey)
	var found string
	switch {
	case errors.Is(err, blobstore.ErrNotFound):
		found = "no " + VolumeKey
	case err != nil:
		return fmt.Errorf("check that %s still holds volume %s: %w", r.URL(), r.cfg.VolumeID, err)
	default:
		cfg, err := DecodeConfig(b)
		switch {
		case err != nil:
			found = fmt.Sprintf("an unreadable %s (%v)", VolumeKey, err)
		case cfg.VolumeID != r.cfg.VolumeID:
			found = "volume " + cfg.VolumeID
		default:
			return nil
		}
	}
	return &VolumeChangedError{URL: r.URL(), Want: r.cfg.VolumeID, Found: found}
}
