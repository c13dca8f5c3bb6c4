package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// loadDir materializes the entries of directory ino from its stored tree,
// if that has not happened yet. The tree is fetched without holding the
// namespace lock, once for concurrent callers. Loading a non-directory is
// ErrNotDir.
func (v *Volume) loadDir(ctx context.Context, ino uint64) error {
	v.mu.RLock()
	rec, err := v.names.ToLoad(ino)
	v.mu.RUnlock()
	if err != nil || rec == nil {
		return err
	}
	tree := rec.Tree
	ch := v.fetches.DoChan("tree:"+strconv.FormatUint(ino, 10)+":"+tree.String()+":"+rec.Origin, func() (any, error) {
		entries, err := v.dirEntries(context.WithoutCancel(ctx), tree, rec.HasOrigin, rec.Origin)
		if err != nil {
			return nil, err
		}
		return nil, v.installDir(ino, tree, entries)
	})
	select {
	case <-ctx.Done():
		return ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			if errors.Is(res.Err, ErrNotFound) {
				return res.Err
			}
			v.log.Error("loading directory failed", "ino", ino, "tree", tree.Hash.String(), "err", res.Err)
			return fmt.Errorf("%w: load directory: %w", ErrIO, res.Err)
		}
		return nil
	}
}

// installDir writes the loaded entries of directory ino
// (ns.Namespace.InstallDir) under the namespace lock.
func (v *Volume) installDir(ino uint64, tree snapshot.BlobRef, entries []snapshot.Entry) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.names.InstallDir(meta.NewBatch(v.db), ino, tree, entries, v.readsThrough(), v.inlineMax)
}
