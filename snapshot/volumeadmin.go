package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

// The whole life of a volume: describing it (Info) and deleting it
// (RemoveVolume).

// volumeLayout lists the keys and prefixes of a volume's objects (see
// FORMAT.md); anything else under the store URL is not the volume's.
var volumeLayout = []string{VolumeKey, RetentionKey, "packs/", "commits/", "refs/", "leases/", "gc/"}

// isVolumeKey reports whether key belongs to the volume's layout.
func isVolumeKey(key string) bool {
	for _, p := range volumeLayout {
		if key == p || strings.HasSuffix(p, "/") && strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// objectKind names the part of the layout key belongs to, for Info.
func objectKind(key string) string {
	switch {
	case strings.HasPrefix(key, "packs/"):
		return "packs"
	case strings.HasPrefix(key, "commits/"):
		return "commits"
	case strings.HasPrefix(key, SnapshotPrefix):
		return "snapshots"
	case strings.HasPrefix(key, "refs/"):
		return "heads"
	case strings.HasPrefix(key, "leases/"):
		return "leases"
	}
	return "other" // volume.json, retention.json, gc/
}

// ObjectCount counts objects of one kind.
type ObjectCount struct {
	Kind    string `json:"kind"` // packs, commits, snapshots, heads, leases, other
	Objects int    `json:"objects"`
	Bytes   int64  `json:"bytes"`
}

// VolumeInfo describes a volume, as `agentfs volume info` shows it.
type VolumeInfo struct {
	URL    string `json:"url"` // without credentials
	Config Config `json:"config"`
	// Objects and Bytes count every object of the volume (its layout in
	// FORMAT.md); Kinds splits them. Foreign counts the objects under the
	// store URL that are not the volume's.
	Objects int           `json:"objects"`
	Bytes   int64         `json:"bytes"`
	Kinds   []ObjectCount `json:"kinds"`
	Foreign int           `json:"foreign,omitempty"`
	// Branches, with their heads and leases (BranchInfo.Lease.Live: a
	// writer holds it).
	Branches  []BranchInfo `json:"branches"`
	Snapshots []string     `json:"snapshots"`
	Retention Retention    `json:"retention"`
	// RetentionStored is false when the volume uses DefaultRetention.
	RetentionStored bool `json:"retention_stored"`
	// LastGC is when a gc last applied the volume's policy (zero: never).
	LastGC time.Time `json:"last_gc,omitzero"`
}

// Info describes the volume: its parameters, every object it has, its
// branches with their leases as of now, its snapshots and its retention.
// It lists the whole store URL once and reads each branch's head commit
// and lease.
func (r *Repo) Info(ctx context.Context, now time.Time) (VolumeInfo, error) {
	info := VolumeInfo{URL: r.URL(), Config: r.cfg}
	objs, err := r.listAll(ctx, "")
	if err != nil {
		return info, fmt.Errorf("list %s: %w", r.URL(), err)
	}
	kinds := map[string]*ObjectCount{}
	for _, o := range objs {
		if !isVolumeKey(o.Key) {
			info.Foreign++
			continue
		}
		info.Objects++
		info.Bytes += o.Size
		k := objectKind(o.Key)
		if kinds[k] == nil {
			kinds[k] = &ObjectCount{Kind: k}
		}
		kinds[k].Objects++
		kinds[k].Bytes += o.Size
		if name, ok := strings.CutPrefix(o.Key, SnapshotPrefix); ok {
			info.Snapshots = append(info.Snapshots, name)
		}
	}
	for _, k := range []string{"packs", "commits", "snapshots", "heads", "leases", "other"} {
		if c := kinds[k]; c != nil {
			info.Kinds = append(info.Kinds, *c)
		}
	}
	if info.Branches, err = r.Branches(ctx, now); err != nil {
		return info, err
	}
	if info.Retention, info.RetentionStored, err = r.Retention(ctx); err != nil {
		return info, err
	}
	if t, ok, err := r.LastGC(ctx); err != nil {
		return info, err
	} else if ok {
		info.LastGC = t
	}
	return info, nil
}

// RemoveOptions modify RemoveVolume.
type RemoveOptions struct {
	// Force removes the volume although a writer holds a live lease on one
	// of its branches (that writer fails at its next commit: the volume is
	// gone), and removes what an interrupted removal left behind (objects
	// of the layout under a URL without volume.json).
	Force bool
	// Now is the clock leases are judged by; default time.Now.
	Now func() time.Time
	// Keys supplies the key of an encrypted volume, to read its leases.
	// With Force, an encrypted volume is removed without its key.
	Keys KeySource
	// Concurrency bounds the deletes in flight; default 16.
	Concurrency int
	// Progress, if set, is called from one goroutine at a time, with phase
	// "delete" (Done of Total objects, Items: bytes deleted).
	Progress func(Progress)
}

// RemoveReport says what RemoveVolume deleted.
type RemoveReport struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Foreign objects under the store URL that are not the volume's are
	// left alone.
	Foreign int `json:"foreign,omitempty"`
}

// RemoveVolume deletes every object of the volume at store (its layout in
// FORMAT.md; other objects under the URL are left alone and counted).
//
// It refuses, with an error matching ErrLeaseHeld that names the writer,
// while a writer holds a live lease on any branch, unless opts.Force. A
// store without volume.json gives ErrNoVolume, unless it holds objects of
// the layout (an interrupted removal) and opts.Force is set. An encrypted
// volume needs opts.Keys to check its leases, unless opts.Force.
//
// volume.json goes first: from then on the volume does not open, and every
// writer still running stops at its next commit or lease renewal (they
// check that the store still holds their volume: CheckVolume), so nothing
// moves a ref into what is being deleted. The rest is deleted in two
// passes, the second catching packs a forced writer uploaded meanwhile. An
// interrupted removal is finished by running it again with Force.
func RemoveVolume(ctx context.Context, store *blobstore.Store, opts RemoveOptions) (RemoveReport, error) {
	var rep RemoveReport
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	r, err := OpenWithKey(ctx, store, opts.Keys)
	var keyErr *KeyError
	switch {
	case errors.Is(err, ErrNoVolume):
		left, lerr := listVolumeObjects(ctx, store)
		if lerr != nil {
			return rep, lerr
		}
		if len(left) == 0 {
			return rep, err
		}
		if !opts.Force {
			return rep, fmt.Errorf("%s has no volume.json but %d objects of a volume (packs/, commits/, refs/, leases/, …), "+
				"left by an interrupted removal: %w (remove them with --force)", store.URL(), len(left), ErrNoVolume)
		}
	case errors.As(err, &keyErr) && !opts.Force:
		return rep, fmt.Errorf("%w (or pass --force to remove it without reading its leases)", err)
	case err != nil && keyErr == nil:
		return rep, err
	default:
		if r != nil {
			defer r.Close()
		}
		if !opts.Force {
			if err := r.CheckNoWriter(ctx, now()); err != nil {
				return rep, err
			}
		}
		a, _ := store.Stat(ctx, VolumeKey)
		if err := store.Delete(ctx, VolumeKey); err != nil && !errors.Is(err, blobstore.ErrNotFound) {
			return rep, fmt.Errorf("remove %s of %s: %w", VolumeKey, store.URL(), err)
		}
		rep.Objects++
		rep.Bytes += a.Size
	}
	for pass := 0; pass < 2; pass++ {
		objs, err := listVolumeObjects(ctx, store)
		if err != nil {
			return rep, err
		}
		if len(objs) == 0 {
			break
		}
		if err := deleteObjects(ctx, store, objs, opts, &rep); err != nil {
			return rep, err
		}
	}
	all, err := listEvery(ctx, store, "")
	if err != nil {
		return rep, err
	}
	for _, o := range all {
		if !isVolumeKey(o.Key) {
			rep.Foreign++
		}
	}
	return rep, nil
}

// CheckNoWriter returns an error matching ErrLeaseHeld (a
// *LeaseHeldError naming the writer, wrapped) for the first branch whose
// current lease is live at now, and nil when no writer holds any branch.
func (r *Repo) CheckNoWriter(ctx context.Context, now time.Time) error {
	leases, err := r.listAll(ctx, "leases/")
	if err != nil {
		return fmt.Errorf("list the leases of %s: %w", r.URL(), err)
	}
	var branches []string
	for _, o := range leases {
		if b, _, ok := strings.Cut(strings.TrimPrefix(o.Key, "leases/"), "/"); ok && !slices.Contains(branches, b) {
			branches = append(branches, b)
		}
	}
	for _, b := range branches {
		li, err := r.CurrentLease(ctx, b, now)
		if err != nil {
			return err
		}
		if li != nil && li.Live {
			return fmt.Errorf("remove volume %s: %w (stop that writer — agentfs umount — or force the removal: agentfs volume rm --force)",
				r.URL(), &LeaseHeldError{Branch: b, Holder: li.Holder, Expires: li.Expires})
		}
	}
	return nil
}

// listVolumeObjects lists the objects of the volume's layout under store:
// refs and commits before packs, so that the deletes, started in that
// order, mostly remove what names data before the data.
func listVolumeObjects(ctx context.Context, store *blobstore.Store) ([]blobstore.ObjectInfo, error) {
	var out []blobstore.ObjectInfo
	for _, p := range []string{"refs/", "leases/", "commits/", "packs/", "gc/", RetentionKey, VolumeKey} {
		objs, err := listEvery(ctx, store, p)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if isVolumeKey(o.Key) && (strings.HasSuffix(p, "/") || o.Key == p) {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// listEvery lists every object under prefix.
func listEvery(ctx context.Context, store *blobstore.Store, prefix string) ([]blobstore.ObjectInfo, error) {
	var out []blobstore.ObjectInfo
	err := store.Walk(ctx, prefix, func(o blobstore.ObjectInfo) error {
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", store.URL(), err)
	}
	return out, nil
}

// deleteObjects deletes objs, starting them in order, up to
// opts.Concurrency at once, counting into rep. Objects already gone count
// as deleted.
func deleteObjects(ctx context.Context, store *blobstore.Store, objs []blobstore.ObjectInfo, opts RemoveOptions, rep *RemoveReport) error {
	conc := opts.Concurrency
	if conc <= 0 {
		conc = 16
	}
	prog := newProgressFunc(opts.Progress)
	var done, bytes atomic.Int64
	total := int64(len(objs))
	err := forEach(ctx, conc, objs, func(ctx context.Context, o blobstore.ObjectInfo) error {
		if err := store.Delete(ctx, o.Key); err != nil && !errors.Is(err, blobstore.ErrNotFound) {
			return fmt.Errorf("remove %s from %s: %w", o.Key, store.URL(), err)
		}
		prog(Progress{Phase: "delete", Done: done.Add(1), Total: total, Items: bytes.Add(o.Size)})
		return nil
	})
	rep.Objects += int(done.Load())
	rep.Bytes += bytes.Load()
	return err
}
