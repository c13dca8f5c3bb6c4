package fs

import (
	"context"
	"errors"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/cache"
)

// File handles (name_to_handle_at, open_by_handle_at, NFS re-export).
// The mount negotiates FUSE_EXPORT_SUPPORT: a handle holds the node ID,
// which is the engine's inode number, and the generation
// (cache.Volume.Generation, one per cache directory). When the kernel no
// longer knows the node (after its caches were dropped, or on a new mount
// of the same cache directory), it asks for "." of the node ID (LookupNode)
// and, to reconnect a directory, for ".." (LookupParent); the engine
// answers both from its database. A handle therefore survives dropped
// caches and remounts with the same cache directory; it is stale (ESTALE)
// once its file is removed, under a new cache directory, and for files a
// restore or discard replaced.

var (
	_ gofs.NodeLookupNoder    = (*node)(nil)
	_ gofs.NodeLookupParenter = (*node)(nil)
)

// LookupNode resolves inode number id with no path, for a file handle the
// kernel no longer has a node for. Called on the root only. An inode the
// engine does not have is ESTALE.
func (n *node) LookupNode(ctx context.Context, id uint64, out *fuse.EntryOut) (_ *gofs.Inode, errno syscall.Errno) {
	defer n.fsys.ops.done(opLookup, time.Now(), &errno)
	a, err := n.fsys.vol.GetAttr(ctx, id)
	if errors.Is(err, cache.ErrNotFound) || err == nil && a.Nlink == 0 {
		return nil, syscall.ESTALE // gone, or unlinked and only still open
	}
	if err != nil {
		return nil, n.fsys.toErrno("lookup-node", id, err)
	}
	return n.child(ctx, &a, out), 0
}

// LookupParent returns the directory holding n and n's name in it, for
// the kernel reconnecting a directory's file handle. Files with no single
// parent (the root, hard-linked files) are ESTALE.
func (n *node) LookupParent(ctx context.Context, out *fuse.EntryOut) (_ *gofs.Inode, _ string, errno syscall.Errno) {
	defer n.fsys.ops.done(opLookup, time.Now(), &errno)
	a, err := n.fsys.vol.GetAttr(ctx, n.ino())
	if err != nil {
		return nil, "", n.errno("lookup-parent", err)
	}
	if a.Parent == 0 {
		return nil, "", syscall.ESTALE
	}
	ents, err := n.fsys.vol.ReadDir(ctx, a.Parent)
	if err != nil {
		return nil, "", n.fsys.toErrno("lookup-parent", a.Parent, err)
	}
	for _, e := range ents {
		if e.Ino != n.ino() {
			continue
		}
		pa, err := n.fsys.vol.GetAttr(ctx, a.Parent)
		if err != nil {
			return nil, "", n.fsys.toErrno("lookup-parent", a.Parent, err)
		}
		return n.child(ctx, &pa, out), e.Name, 0
	}
	return nil, "", syscall.ESTALE
}
