package fs

import (
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/agentfs/agentfs/fs/changefeed"
)

// The change feed (Server.Changes): the request handlers below report
// every change they serve, once the engine accepted it and before the
// kernel gets the answer (so the events of one path keep the order the
// kernel serialized its requests in):
//
//   - create, mkdir, mknod, symlink, link: "created" of the new path;
//   - unlink, rmdir: "deleted";
//   - rename: "deleted" of the old path, then "created" of the new one (a
//     directory's descendants move with it and get no events of their
//     own); RENAME_EXCHANGE: both paths deleted, then both created;
//   - a handle that was written (write, fallocate, copy_file_range into
//     it, or opened with O_TRUNC): one "modified" at its next flush
//     (close(2)) or at its release, not one per write(2);
//   - setattr (truncate, chmod, chown, utimes) and xattr changes:
//     "modified";
//   - changes the engine makes on its own (restore, discard, a read-only
//     mount following its branch), announced through the Invalidate
//     methods: a reset (changefeed.ReasonReplaced).
//
// Paths come from go-fuse's tree of the inodes the kernel knows: a
// request's directory is known to the kernel, and so are its ancestors,
// so a path costs one short lock per level and no engine call. A file
// with several names (hard links) is reported under one of them, the last
// the kernel looked up. An inode with no name left (unlinked while open,
// O_TMPFILE) is not reported. None of this runs while the feed is
// inactive (nobody subscribed since the mount started): then a change
// costs one atomic load.

// Changes returns the mount's change feed; it is closed when the mount
// is gone.
func (s *Server) Changes() *changefeed.Feed { return s.root.fsys.changes }

// pathOf returns the path of in relative to the root ("" for the root),
// or false when in is not reachable from the root any more.
func pathOf(in *gofs.Inode) (string, bool) {
	var names []string
	for !in.IsRoot() {
		name, parent := in.Parent()
		if parent == nil {
			return "", false
		}
		names = append(names, name)
		in = parent
	}
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	return strings.Join(names, "/"), true
}

// childPath returns the path of name in directory dir.
func childPath(dir *gofs.Inode, name string) (string, bool) {
	p, ok := pathOf(dir)
	if !ok {
		return "", false
	}
	if p == "" {
		return name, true
	}
	return p + "/" + name, true
}

// typeOfMode is the feed's type of an entry of file mode mode (S_IFMT
// bits).
func typeOfMode(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		return changefeed.TypeFile
	case syscall.S_IFDIR:
		return changefeed.TypeDir
	case syscall.S_IFLNK:
		return changefeed.TypeSymlink
	}
	return changefeed.TypeOther
}

// recordChild reports op on name in directory n, whose entry has type
// typ.
func (n *node) recordChild(op, name, typ string) {
	f := n.fsys.changes
	if !f.Active() {
		return
	}
	if p, ok := childPath(n.EmbeddedInode(), name); ok {
		f.Record(op, p, typ)
	}
}

// childType is the feed's type of the entry name in n as the kernel knows
// it (it looks an entry up before it removes or renames it), or "file"
// when it does not.
func (n *node) childType(name string) string {
	if ch := n.GetChild(name); ch != nil {
		return typeOfMode(ch.StableAttr().Mode)
	}
	return changefeed.TypeFile
}

// recordModified reports a change of n's data or attributes.
func (n *node) recordModified() {
	f := n.fsys.changes
	if !f.Active() {
		return
	}
	if p, ok := pathOf(n.EmbeddedInode()); ok && p != "" {
		f.Record(changefeed.OpModified, p, typeOfMode(n.StableAttr().Mode))
	}
}

// recordRename reports a rename of name in n to newName in np.
func (n *node) recordRename(name string, np *gofs.Inode, newName string, exchange bool) {
	f := n.fsys.changes
	if !f.Active() {
		return
	}
	typ := n.childType(name)
	from, ok1 := childPath(n.EmbeddedInode(), name)
	to, ok2 := childPath(np, newName)
	if !ok1 || !ok2 {
		return
	}
	if !exchange {
		f.Record(changefeed.OpDeleted, from, typ)
		f.Record(changefeed.OpCreated, to, typ)
		return
	}
	otherType := changefeed.TypeFile
	if ch := np.GetChild(newName); ch != nil {
		otherType = typeOfMode(ch.StableAttr().Mode)
	}
	f.Record(changefeed.OpDeleted, from, typ)
	f.Record(changefeed.OpDeleted, to, otherType)
	f.Record(changefeed.OpCreated, from, otherType)
	f.Record(changefeed.OpCreated, to, typ)
}

// wrote marks handle f (if it is one of ours) as written: its next flush
// or release reports the file modified.
func wrote(f gofs.FileHandle) {
	if h := asHandle(f); h != nil && !h.written.Load() {
		h.written.Store(true)
	}
}

// flushed reports n modified if handle f was written since its last
// flush.
func (n *node) flushed(f gofs.FileHandle) {
	if h := asHandle(f); h != nil && h.written.Load() && h.written.Swap(false) {
		n.recordModified()
	}
}
