package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// mop is one namespace change. It runs under v.mu held exclusively, in one
// Badger transaction. Records are read through it — the in-memory record of
// an open file, with that file's lock held until the end — changed on
// private copies, and installed only when the transaction commits.
type mop struct {
	v     *Volume
	txn   *meta.Txn
	recs  map[uint64]*meta.Inode // private copies read so far
	dirty map[uint64]bool        // copies to write
	nodes map[uint64]*node       // open files whose lock this op holds
	marks map[uint64]bool        // directories whose trees must be rewritten
	after []func()               // run after a successful commit
	d     meta.Delta             // dirty-set changes besides marks
}

// change runs fn as one namespace change.
func (v *Volume) change(fn func(o *mop) error) error {
	if v.opts.ReadOnly {
		return ErrReadOnly
	}
	if v.closed.Load() {
		return ErrClosed
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	o := &mop{v: v, txn: v.db.NewTransaction(true), recs: map[uint64]*meta.Inode{}, dirty: map[uint64]bool{},
		nodes: map[uint64]*node{}, marks: map[uint64]bool{}}
	defer func() {
		o.txn.Discard()
		for _, n := range o.nodes {
			n.mu.Unlock()
		}
	}()
	if err := fn(o); err != nil {
		return err
	}
	return o.commit()
}

// get returns the private copy of inode ino's record.
func (o *mop) get(ino uint64) (*meta.Inode, error) {
	if r, ok := o.recs[ino]; ok {
		return r, nil
	}
	if n := o.v.lookupNode(ino); n != nil {
		if _, held := o.nodes[ino]; !held {
			n.mu.Lock()
			o.nodes[ino] = n
		}
		r := n.rec.Clone()
		o.recs[ino] = r
		return r, nil
	}
	r, err := readInode(o.txn, ino)
	if err != nil {
		return nil, err
	}
	o.recs[ino] = r
	return r, nil
}

// put schedules r to be written. A changed inode differs from its lower
// layer (see readsThrough).
func (o *mop) put(r *meta.Inode) {
	o.recs[r.Ino] = r
	o.dirty[r.Ino] = true
	o.v.markModified(r)
}

// markEntry records that r's own attributes changed: the tree holding its
// entry must be rewritten.
func (o *mop) markEntry(r *meta.Inode) {
	switch {
	case r.LinkID != 0:
		o.marks[meta.LinkTableDir] = true
	case r.Ino == RootIno:
		o.marks[RootIno] = true
	case r.Parent != 0:
		o.marks[r.Parent] = true
	}
}

// markDir records that dir's entries changed.
func (o *mop) markDir(dir uint64) { o.marks[dir] = true }

func (o *mop) commit() error {
	for ino := range o.dirty {
		if err := o.txn.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(o.recs[ino])); err != nil {
			return err
		}
	}
	o.v.markMu.Lock()
	defer o.v.markMu.Unlock()
	for dir := range o.marks {
		if err := o.v.setMark(o.txn, &o.d, dir); err != nil {
			return err
		}
	}
	if err := o.txn.Commit(); err != nil {
		return fmt.Errorf("cache database: %w", err)
	}
	o.v.dirty.Apply(&o.d)
	for ino, n := range o.nodes {
		if o.dirty[ino] {
			n.rec = o.recs[ino]
		}
	}
	for _, f := range o.after {
		f()
	}
	return nil
}

// lookupChild returns the inode number and type of parent/name in the op's
// transaction.
func (o *mop) lookupChild(parent uint64, name string) (uint64, snapshot.EntryType, error) {
	return getDentry(o.txn, parent, name)
}

func getDentry(txn *meta.Txn, parent uint64, name string) (uint64, snapshot.EntryType, error) {
	it, err := txn.Get(meta.DentryKey(parent, name))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, 0, ErrNotFound
	}
	if err != nil {
		return 0, 0, err
	}
	var ino uint64
	var t snapshot.EntryType
	err = it.Value(func(b []byte) error {
		if len(b) != 9 {
			return fmt.Errorf("dentry %d/%q: %w", parent, name, ErrIO)
		}
		ino, t = meta.U64(b), snapshot.EntryType(b[8])
		return nil
	})
	return ino, t, err
}

func readInode(txn *meta.Txn, ino uint64) (*meta.Inode, error) {
	it, err := txn.Get(meta.Key64(meta.PrefixInode, ino))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("inode %d: %w", ino, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var r *meta.Inode
	err = it.Value(func(b []byte) error {
		var derr error
		if r, derr = meta.DecodeInode(b); derr != nil {
			return fmt.Errorf("%w: %w", derr, ErrIO)
		}
		return nil
	})
	return r, err
}

// dirRec returns the record of directory ino, which must be loaded.
func (o *mop) dirRec(ino uint64) (*meta.Inode, error) {
	r, err := o.get(ino)
	if err != nil {
		return nil, err
	}
	if r.Type != snapshot.TypeDir {
		return nil, ErrNotDir
	}
	if !r.Loaded {
		return nil, errNotLoaded
	}
	return r, nil
}

// errNotLoaded tells a caller to load a directory and retry; it never
// leaves this package.
var errNotLoaded = errors.New("directory not loaded")

func checkName(name string) error {
	if len(name) > MaxNameLen {
		return ErrNameTooLong
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return ErrInvalid
	}
	return nil
}

// retryLoad runs fn, loading directories it reports as not loaded, a few
// times. fn must check every directory of dirs first (dirRec): it reports
// errNotLoaded for one that is not loaded, and retryLoad loads them all.
// Directories are not loaded up front: almost always they are, and
// checking costs a database transaction per namespace change.
func (v *Volume) retryLoad(ctx context.Context, dirs []uint64, fn func() error) error {
	for range 8 {
		err := fn()
		var nl *notLoadedError
		if !errors.As(err, &nl) && !errors.Is(err, errNotLoaded) {
			return err
		}
		if nl != nil {
			if err := v.loadDir(ctx, nl.ino); err != nil {
				return err
			}
			continue
		}
		for _, d := range dirs {
			if err := v.loadDir(ctx, d); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("directory keeps unloading: %w", ErrIO)
}

// notLoadedError names a directory to load before retrying.
type notLoadedError struct{ ino uint64 }

func (e *notLoadedError) Error() string { return fmt.Sprintf("directory %d not loaded", e.ino) }

// Lookup returns the attributes of the entry name in directory parent.
func (v *Volume) Lookup(ctx context.Context, parent uint64, name string) (Attr, error) {
	if len(name) > MaxNameLen {
		return Attr{}, ErrNameTooLong
	}
	for range 8 {
		a, err := v.lookupLoaded(parent, name)
		if !errors.Is(err, errNotLoaded) {
			return a, err
		}
		if err := v.loadDir(ctx, parent); err != nil {
			return Attr{}, err
		}
	}
	return Attr{}, fmt.Errorf("directory keeps unloading: %w", ErrIO)
}

// lookupLoaded is Lookup in one database transaction, for a parent that
// is loaded; errNotLoaded otherwise.
func (v *Volume) lookupLoaded(parent uint64, name string) (Attr, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var a Attr
	err := v.db.View(func(txn *meta.Txn) error {
		dir, err := readInode(txn, parent)
		if err != nil {
			return err
		}
		if dir.Type != snapshot.TypeDir {
			return ErrNotDir
		}
		if !dir.Loaded {
			return errNotLoaded
		}
		ino, _, err := getDentry(txn, parent, name)
		if err != nil {
			return err
		}
		a, err = v.attrOf(txn, ino)
		return err
	})
	return a, err
}

// attrOf returns the current attributes of ino: an open file's in-memory
// record, or the stored one.
func (v *Volume) attrOf(txn *meta.Txn, ino uint64) (Attr, error) {
	if n := v.lookupNode(ino); n != nil {
		n.mu.RLock()
		a := recordAttr(n.rec)
		n.mu.RUnlock()
		return a, nil
	}
	r, err := readInode(txn, ino)
	if err != nil {
		return Attr{}, err
	}
	return recordAttr(r), nil
}

// GetAttr returns the attributes of ino.
func (v *Volume) GetAttr(ctx context.Context, ino uint64) (Attr, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var a Attr
	err := v.db.View(func(txn *meta.Txn) error {
		var err error
		a, err = v.attrOf(txn, ino)
		return err
	})
	return a, err
}

// Readlink returns the target of symlink ino.
func (v *Volume) Readlink(ctx context.Context, ino uint64) (string, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var target string
	err := v.db.View(func(txn *meta.Txn) error {
		r, err := readInode(txn, ino)
		if err != nil {
			return err
		}
		if r.Type != snapshot.TypeSymlink {
			return ErrInvalid
		}
		target = r.Target
		return nil
	})
	return target, err
}

// ReadDir returns the entries of directory ino (without "." and ".."),
// sorted by name: a consistent snapshot at the time of the call.
func (v *Volume) ReadDir(ctx context.Context, ino uint64) ([]DirEntry, error) {
	if err := v.loadDir(ctx, ino); err != nil {
		return nil, err
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []DirEntry
	err := v.db.View(func(txn *meta.Txn) error {
		r, err := readInode(txn, ino)
		if err != nil {
			return err
		}
		if r.Type != snapshot.TypeDir {
			return ErrNotDir
		}
		prefix := meta.DentryPrefix(ino)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 256})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			name := string(item.Key()[len(prefix):])
			err := item.Value(func(b []byte) error {
				out = append(out, DirEntry{Name: name, Ino: meta.U64(b), Type: snapshot.EntryType(b[8])})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// newInode creates the record of a new inode named name in dir.
func (o *mop) newInode(dir *meta.Inode, name string, t snapshot.EntryType, mode uint32, cred Cred) (*meta.Inode, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if _, _, err := o.lookupChild(dir.Ino, name); err == nil {
		return nil, ErrExists
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	ino, err := o.v.allocIno()
	if err != nil {
		return nil, err
	}
	now := o.v.now().UnixNano()
	r := &meta.Inode{Ino: ino, Type: t, Mode: mode & ModePerm, Uid: cred.Uid, Gid: cred.Gid,
		Atime: now, Mtime: now, Ctime: now, Nlink: 1, Parent: dir.Ino, Inline: t == snapshot.TypeFile}
	if dir.Mode&ModeSetgid != 0 {
		// BSD group semantics in setgid directories, as on ext4.
		r.Gid = dir.Gid
		if t == snapshot.TypeDir {
			r.Mode |= ModeSetgid
		}
	}
	if t == snapshot.TypeDir {
		r.Nlink = 2
		r.Loaded = true
		dir.Nlink++
		o.markDir(ino) // it has no stored tree until the next checkpoint
	}
	if err := o.txn.Set(meta.DentryKey(dir.Ino, name), meta.DentryValue(ino, t)); err != nil {
		return nil, err
	}
	dir.Mtime, dir.Ctime = now, now
	o.put(r)
	o.put(dir)
	o.markDir(dir.Ino)
	o.markEntry(dir)
	return r, nil
}

func (v *Volume) create(ctx context.Context, parent uint64, name string, t snapshot.EntryType, mode uint32, rdev uint64, target string, cred Cred) (Attr, error) {
	var a Attr
	err := v.retryLoad(ctx, []uint64{parent}, func() error {
		return v.change(func(o *mop) error {
			dir, err := o.dirRec(parent)
			if err != nil {
				return err
			}
			r, err := o.newInode(dir, name, t, mode, cred)
			if err != nil {
				return err
			}
			r.Rdev = rdev
			r.Target = target
			a = recordAttr(r)
			return nil
		})
	})
	return a, err
}

// Mkdir creates directory name in parent with permission bits mode.
func (v *Volume) Mkdir(ctx context.Context, parent uint64, name string, mode uint32, cred Cred) (Attr, error) {
	return v.create(ctx, parent, name, snapshot.TypeDir, mode, 0, "", cred)
}

// Mknod creates a special file (FIFO, socket, character or block device;
// mode carries the type bits) or, for a regular type, an empty file.
func (v *Volume) Mknod(ctx context.Context, parent uint64, name string, mode uint32, rdev uint64, cred Cred) (Attr, error) {
	t, ok := TypeOfMode(mode)
	if !ok || t == snapshot.TypeDir || t == snapshot.TypeSymlink {
		return Attr{}, ErrInvalid
	}
	if t != snapshot.TypeCharDev && t != snapshot.TypeBlockDev {
		rdev = 0
	}
	return v.create(ctx, parent, name, t, mode, rdev, "", cred)
}

// Symlink creates symlink name in parent pointing to target.
func (v *Volume) Symlink(ctx context.Context, parent uint64, name, target string, cred Cred) (Attr, error) {
	if len(target) > MaxSymlinkLen {
		return Attr{}, ErrNameTooLong
	}
	if target == "" {
		return Attr{}, ErrNotFound
	}
	return v.create(ctx, parent, name, snapshot.TypeSymlink, 0o777, 0, target, cred)
}

// Create creates regular file name in parent and opens it (as Open does).
// With exclusive false, an existing regular file is opened instead
// (truncated if truncate is set).
func (v *Volume) Create(ctx context.Context, parent uint64, name string, mode uint32, cred Cred, exclusive, truncate bool) (Attr, error) {
	a, err := v.create(ctx, parent, name, snapshot.TypeFile, mode, 0, "", cred)
	if errors.Is(err, ErrExists) && !exclusive {
		a, err = v.Lookup(ctx, parent, name)
		if err != nil {
			return Attr{}, err
		}
		if a.Type == snapshot.TypeDir {
			return Attr{}, ErrIsDir
		}
		return v.Open(ctx, a.Ino, truncate)
	}
	if err != nil {
		return Attr{}, err
	}
	if _, err := v.Open(ctx, a.Ino, false); err != nil {
		return Attr{}, err
	}
	return a, nil
}

// CreateUnnamed creates a regular file with no name (open(2) with
// O_TMPFILE) for directory parent, which must exist (its set-group-ID bit
// gives the file its group, as Create does), and opens it (as Open does).
// The file has link count 0 and is an orphan: it is deleted with its data
// at its last Release, and by the recovery after a crash, unless Link
// gives it a name first. It is in no tree and nothing of it is uploaded
// while it has no name.
func (v *Volume) CreateUnnamed(ctx context.Context, parent uint64, mode uint32, cred Cred) (Attr, error) {
	var ino uint64
	err := v.retryLoad(ctx, []uint64{parent}, func() error {
		return v.change(func(o *mop) error {
			dir, err := o.dirRec(parent)
			if err != nil {
				return err
			}
			if ino, err = o.v.allocIno(); err != nil {
				return err
			}
			now := o.v.now().UnixNano()
			r := &meta.Inode{Ino: ino, Type: snapshot.TypeFile, Mode: mode & ModePerm, Uid: cred.Uid, Gid: cred.Gid,
				Atime: now, Mtime: now, Ctime: now, Inline: true}
			if dir.Mode&ModeSetgid != 0 {
				r.Gid = dir.Gid
			}
			o.put(r)
			return o.txn.Set(meta.Key64(meta.PrefixOrphan, ino), nil)
		})
	})
	if err != nil {
		return Attr{}, err
	}
	return v.Open(ctx, ino, false)
}

// Link creates name in newParent as a new name of ino (not a directory).
// A file with no name that is still open (CreateUnnamed, or unlinked while
// open) gets name as its only name and is no longer an orphan; the kernel
// allows that only for O_TMPFILE files. A file with no name that nobody
// has open is ErrNotFound.
func (v *Volume) Link(ctx context.Context, ino, newParent uint64, name string) (Attr, error) {
	if err := checkName(name); err != nil {
		return Attr{}, err
	}
	var a Attr
	err := v.retryLoad(ctx, []uint64{newParent}, func() error {
		return v.change(func(o *mop) error {
			dir, err := o.dirRec(newParent)
			if err != nil {
				return err
			}
			r, err := o.get(ino)
			if err != nil {
				return err
			}
			if r.Type == snapshot.TypeDir {
				return ErrPermission
			}
			if r.Nlink == 0 && o.v.openCount(ino) == 0 {
				return ErrNotFound
			}
			if _, _, err := o.lookupChild(newParent, name); err == nil {
				return ErrExists
			} else if !errors.Is(err, ErrNotFound) {
				return err
			}
			if r.Nlink == 0 {
				return o.name(r, dir, name, &a)
			}
			if r.LinkID == 0 {
				// The file becomes a hard-link group: its entry moves to
				// the link table, its old directory names it by ID.
				r.LinkID = newLinkID()
				if err := o.txn.Set(meta.Key64(meta.PrefixLink, r.LinkID), meta.Put64(ino)); err != nil {
					return err
				}
				if r.Parent != 0 {
					o.markDir(r.Parent)
				}
				r.Parent = 0
			}
			now := o.v.now().UnixNano()
			r.Nlink++
			r.Ctime = now
			dir.Mtime, dir.Ctime = now, now
			if err := o.txn.Set(meta.DentryKey(newParent, name), meta.DentryValue(ino, r.Type)); err != nil {
				return err
			}
			o.put(r)
			o.put(dir)
			o.markEntry(r)
			o.markDir(newParent)
			o.markEntry(dir)
			a = recordAttr(r)
			return nil
		})
	})
	return a, err
}

// name gives orphan r (open, with no name) its only name, name in dir,
// and fills a with its attributes.
func (o *mop) name(r, dir *meta.Inode, name string, a *Attr) error {
	if err := o.txn.Delete(meta.Key64(meta.PrefixOrphan, r.Ino)); err != nil {
		return err
	}
	now := o.v.now().UnixNano()
	r.Nlink, r.Parent, r.LinkID, r.Ctime = 1, dir.Ino, 0, now
	dir.Mtime, dir.Ctime = now, now
	if err := o.txn.Set(meta.DentryKey(dir.Ino, name), meta.DentryValue(r.Ino, r.Type)); err != nil {
		return err
	}
	// Its data is the volume's from now on: upload what it holds.
	if err := meta.SetFileDirty(o.txn, &o.d, r.Ino, len(r.Dirty) > 0); err != nil {
		return err
	}
	o.put(r)
	o.put(dir)
	o.markEntry(r)
	o.markDir(dir.Ino)
	o.markEntry(dir)
	*a = recordAttr(r)
	return nil
}

func newLinkID() uint64 {
	for {
		id := meta.U64(randBytes(8))
		if id != 0 {
			return id
		}
	}
}

// dropName removes one name of r (whose dentry the caller deletes): nlink
// drops, and at zero the inode is deleted, or kept as an orphan while open.
func (o *mop) dropName(r *meta.Inode) error {
	now := o.v.now().UnixNano()
	if r.Type == snapshot.TypeDir {
		r.Nlink = 0
	} else {
		r.Nlink--
	}
	r.Ctime = now
	if r.Nlink > 0 {
		o.put(r)
		o.markEntry(r)
		return nil
	}
	if r.LinkID != 0 {
		if err := o.txn.Delete(meta.Key64(meta.PrefixLink, r.LinkID)); err != nil {
			return err
		}
		o.marks[meta.LinkTableDir] = true
	}
	r.Parent = 0
	if o.v.openCount(r.Ino) > 0 {
		// Unlinked while open: the data stays until the last close, and
		// is no longer anything to upload.
		o.put(r)
		if err := meta.SetFileDirty(o.txn, &o.d, r.Ino, false); err != nil {
			return err
		}
		return o.txn.Set(meta.Key64(meta.PrefixOrphan, r.Ino), nil)
	}
	ino := r.Ino
	delete(o.dirty, ino)
	if n := o.nodes[ino]; n != nil {
		// Its last user is releasing it right now (opens is 0, and
		// releaseNode waits for n.mu, which this op holds): its record
		// must say it is gone, or releaseNode would store it again.
		gone := r
		o.after = append(o.after, func() { n.rec = gone })
	}
	for _, k := range [][]byte{meta.Key64(meta.PrefixInode, ino), meta.Key64(meta.PrefixPresence, ino), meta.Key64(meta.PrefixInline, ino)} {
		if err := o.txn.Delete(k); err != nil {
			return err
		}
	}
	if err := meta.SetFileDirty(o.txn, &o.d, ino, false); err != nil {
		return err
	}
	dirty := r.Dirty
	o.after = append(o.after, func() { o.v.forgetGens(ino, dirty); o.v.dropData(ino) })
	return nil
}

// Unlink removes the non-directory entry name from parent.
func (v *Volume) Unlink(ctx context.Context, parent uint64, name string) error {
	return v.remove(ctx, parent, name, false)
}

// Rmdir removes the empty directory name from parent.
func (v *Volume) Rmdir(ctx context.Context, parent uint64, name string) error {
	return v.remove(ctx, parent, name, true)
}

func (v *Volume) remove(ctx context.Context, parent uint64, name string, isDir bool) error {
	if len(name) > MaxNameLen {
		return ErrNameTooLong
	}
	if name == "." || (isDir && name == "..") {
		return ErrInvalid
	}
	return v.retryLoad(ctx, []uint64{parent}, func() error {
		return v.change(func(o *mop) error {
			dir, err := o.dirRec(parent)
			if err != nil {
				return err
			}
			ino, t, err := o.lookupChild(parent, name)
			if err != nil {
				return err
			}
			if isDir && t != snapshot.TypeDir {
				return ErrNotDir
			}
			if !isDir && t == snapshot.TypeDir {
				return ErrIsDir
			}
			r, err := o.get(ino)
			if err != nil {
				return err
			}
			if isDir {
				if err := o.checkEmpty(r); err != nil {
					return err
				}
				dir.Nlink--
			}
			if err := o.txn.Delete(meta.DentryKey(parent, name)); err != nil {
				return err
			}
			now := o.v.now().UnixNano()
			dir.Mtime, dir.Ctime = now, now
			o.put(dir)
			o.markDir(parent)
			o.markEntry(dir)
			if isDir {
				if err := meta.ClearMark(o.txn, &o.d, ino); err != nil {
					return err
				}
				delete(o.marks, ino)
			}
			return o.dropName(r)
		})
	})
}

// checkEmpty fails with ErrNotEmpty unless directory r has no entries.
func (o *mop) checkEmpty(r *meta.Inode) error {
	if !r.Loaded {
		if r.Tree.Hash == o.v.repo.EmptyTreeHash() {
			return nil
		}
		return &notLoadedError{ino: r.Ino}
	}
	it := o.txn.NewIterator(badger.IteratorOptions{Prefix: meta.DentryPrefix(r.Ino), PrefetchValues: false})
	defer it.Close()
	it.Rewind()
	if it.Valid() {
		return ErrNotEmpty
	}
	return nil
}

// Rename moves parent/name to newParent/newName, replacing a compatible
// target (an empty directory for a directory, a non-directory for a
// non-directory) unless flags say otherwise.
//
// A rename is in the cache database when it returns, as if followed by
// fsync of the directories: the write-a-temporary-file, fsync, rename
// pattern of editors and git then survives a crash of the mount without
// the directory fsync most of them omit (ext4's auto_da_alloc makes a
// similar promise for renames over a file).
func (v *Volume) Rename(ctx context.Context, parent uint64, name string, newParent uint64, newName string, flags RenameFlags) error {
	if flags&RenameNoReplace != 0 && flags&RenameExchange != 0 {
		return ErrInvalid
	}
	if err := checkName(newName); err != nil {
		return err
	}
	if len(name) > MaxNameLen {
		return ErrNameTooLong
	}
	err := v.retryLoad(ctx, []uint64{parent, newParent}, func() error {
		return v.change(func(o *mop) error { return o.rename(parent, name, newParent, newName, flags) })
	})
	if err == nil {
		err = v.db.Flush()
	}
	return err
}

// rename moves parent/name to newParent/newName within the change (the
// contract is Volume.Rename's). It resolves and checks both ends, then
// either swaps the two names (RenameExchange) or moves the source over the
// target (dropping a replaced target's name), and finally stamps, stores
// and marks both directories and the renamed inode.
func (o *mop) rename(parent uint64, name string, newParent uint64, newName string, flags RenameFlags) error {
	e, err := o.resolveRename(parent, name, newParent, newName, flags)
	if err != nil || e == nil {
		return err
	}
	now := o.v.now().UnixNano()
	if flags&RenameExchange != 0 {
		err = o.renameExchange(e, now)
	} else {
		err = o.renameOver(e, now)
	}
	if err != nil {
		return err
	}
	e.src.Mtime, e.src.Ctime = now, now
	e.dst.Mtime, e.dst.Ctime = now, now
	o.put(e.src)
	o.put(e.dst)
	o.markDir(parent)
	o.markDir(newParent)
	o.markEntry(e.src)
	o.markEntry(e.dst)
	o.markEntry(e.r)
	return nil
}

// renameEnds are the two ends of a rename, resolved in its transaction.
type renameEnds struct {
	parent, newParent uint64
	name, newName     string
	src, dst          *meta.Inode // the two directories (one record if the same)
	ino               uint64      // the renamed inode
	t                 snapshot.EntryType
	r                 *meta.Inode // its record
	exists            bool        // newParent/newName exists
	tino              uint64      // the target's inode, if it exists
	tt                snapshot.EntryType
}

// resolveRename reads both directories and both names and checks what
// does not depend on the operation's kind: the flags against the target's
// existence, and that a directory does not move into its own subtree. It
// returns nil, nil when there is nothing to do (both names are one file's).
func (o *mop) resolveRename(parent uint64, name string, newParent uint64, newName string, flags RenameFlags) (*renameEnds, error) {
	e := &renameEnds{parent: parent, newParent: newParent, name: name, newName: newName}
	var err error
	if e.src, err = o.dirRec(parent); err != nil {
		return nil, err
	}
	e.dst = e.src
	if newParent != parent {
		if e.dst, err = o.dirRec(newParent); err != nil {
			return nil, err
		}
	}
	if e.ino, e.t, err = o.lookupChild(parent, name); err != nil {
		return nil, err
	}
	e.tino, e.tt, err = o.lookupChild(newParent, newName)
	e.exists = err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if flags&RenameExchange != 0 && !e.exists {
		return nil, ErrNotFound
	}
	if flags&RenameNoReplace != 0 && e.exists {
		return nil, ErrExists
	}
	if e.exists && e.tino == e.ino {
		return nil, nil // two names of one file, or the same name: nothing to do
	}
	if e.r, err = o.get(e.ino); err != nil {
		return nil, err
	}
	// A directory must not move into its own subtree.
	if e.t == snapshot.TypeDir && newParent != parent {
		if err := o.checkNotAncestor(e.ino, newParent); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// renameExchange swaps the two names' inodes (RenameExchange), moving a
// directory's link to its parent when a directory and a non-directory
// trade places.
func (o *mop) renameExchange(e *renameEnds, now int64) error {
	tr, err := o.get(e.tino)
	if err != nil {
		return err
	}
	if e.tt == snapshot.TypeDir && e.newParent != e.parent {
		if err := o.checkNotAncestor(e.tino, e.parent); err != nil {
			return err
		}
	}
	if err := o.txn.Set(meta.DentryKey(e.parent, e.name), meta.DentryValue(e.tino, e.tt)); err != nil {
		return err
	}
	if err := o.txn.Set(meta.DentryKey(e.newParent, e.newName), meta.DentryValue(e.ino, e.t)); err != nil {
		return err
	}
	if e.newParent != e.parent {
		if e.t == snapshot.TypeDir && e.tt != snapshot.TypeDir {
			e.src.Nlink--
			e.dst.Nlink++
		} else if e.tt == snapshot.TypeDir && e.t != snapshot.TypeDir {
			e.src.Nlink++
			e.dst.Nlink--
		}
	}
	o.reparent(e.r, e.newParent)
	o.reparent(tr, e.parent)
	e.r.Ctime, tr.Ctime = now, now
	o.put(e.r)
	o.put(tr)
	return nil
}

// renameOver moves the source name to the target, replacing a compatible
// target (a non-directory by a non-directory, an empty directory by a
// directory), whose name is dropped.
func (o *mop) renameOver(e *renameEnds, now int64) error {
	if e.exists {
		tr, err := o.get(e.tino)
		if err != nil {
			return err
		}
		switch {
		case e.t == snapshot.TypeDir && e.tt != snapshot.TypeDir:
			return ErrNotDir
		case e.t != snapshot.TypeDir && e.tt == snapshot.TypeDir:
			return ErrIsDir
		case e.tt == snapshot.TypeDir:
			if err := o.checkEmpty(tr); err != nil {
				return err
			}
			e.dst.Nlink--
			if err := meta.ClearMark(o.txn, &o.d, e.tino); err != nil {
				return err
			}
			delete(o.marks, e.tino)
		}
		if err := o.dropName(tr); err != nil {
			return err
		}
	}
	if err := o.txn.Delete(meta.DentryKey(e.parent, e.name)); err != nil {
		return err
	}
	if err := o.txn.Set(meta.DentryKey(e.newParent, e.newName), meta.DentryValue(e.ino, e.t)); err != nil {
		return err
	}
	if e.t == snapshot.TypeDir && e.newParent != e.parent {
		e.src.Nlink--
		e.dst.Nlink++
	}
	o.reparent(e.r, e.newParent)
	e.r.Ctime = now
	o.put(e.r)
	return nil
}

// reparent records that r's name now lives in dir.
func (o *mop) reparent(r *meta.Inode, dir uint64) {
	if r.LinkID == 0 {
		r.Parent = dir
	}
}

// checkNotAncestor fails with ErrInvalid if dir is ino or lies below it.
func (o *mop) checkNotAncestor(ino, dir uint64) error {
	for d := dir; d != 0; {
		if d == ino {
			return ErrInvalid
		}
		r, err := o.get(d)
		if err != nil {
			return err
		}
		if d == RootIno {
			break
		}
		d = r.Parent
	}
	return nil
}

// SetAttr changes the attributes in; a size change truncates or extends
// the file (extension reads as zeros).
func (v *Volume) SetAttr(ctx context.Context, ino uint64, in SetAttrIn) (Attr, error) {
	if in.Size != nil {
		if err := v.truncate(ctx, ino, *in.Size); err != nil {
			return Attr{}, err
		}
	}
	var a Attr
	err := v.change(func(o *mop) error {
		r, err := o.get(ino)
		if err != nil {
			return err
		}
		now := o.v.now().UnixNano()
		if in.Mode != nil {
			r.Mode = *in.Mode & ModePerm
		}
		if in.Uid != nil {
			r.Uid = *in.Uid
		}
		if in.Gid != nil {
			r.Gid = *in.Gid
		}
		switch {
		case in.AtimeNow:
			r.Atime = now
		case in.Atime != nil:
			r.Atime = *in.Atime
		}
		switch {
		case in.MtimeNow:
			r.Mtime = now
		case in.Mtime != nil:
			r.Mtime = *in.Mtime
		}
		if in.Ctime != nil {
			r.Ctime = *in.Ctime
		} else {
			r.Ctime = now
		}
		o.put(r)
		o.markEntry(r)
		a = recordAttr(r)
		return nil
	})
	return a, err
}

// GetXattr returns the value of attribute name of ino (ErrNoAttr if unset).
func (v *Volume) GetXattr(ctx context.Context, ino uint64, name string) ([]byte, error) {
	var val []byte
	err := v.readRec(ino, func(r *meta.Inode) error {
		x, ok := r.Xattr(name)
		if !ok {
			return ErrNoAttr
		}
		val = slices.Clone(x)
		return nil
	})
	return val, err
}

// ListXattr returns the attribute names of ino, sorted.
func (v *Volume) ListXattr(ctx context.Context, ino uint64) ([]string, error) {
	var names []string
	err := v.readRec(ino, func(r *meta.Inode) error {
		for _, x := range r.Xattrs {
			names = append(names, x.Name)
		}
		return nil
	})
	return names, err
}

// readRec calls fn with the current record of ino (read-only).
func (v *Volume) readRec(ino uint64, fn func(*meta.Inode) error) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if n := v.lookupNode(ino); n != nil {
		n.mu.RLock()
		defer n.mu.RUnlock()
		return fn(n.rec)
	}
	return v.db.View(func(txn *meta.Txn) error {
		r, err := readInode(txn, ino)
		if err != nil {
			return err
		}
		return fn(r)
	})
}

func checkXattrName(name string) error {
	switch {
	case name == "":
		return ErrInvalid
	case len(name) > MaxXattrName:
		return ErrRange
	case strings.HasPrefix(name, "system."):
		// POSIX ACLs and other system attributes are not kept.
		return ErrNotSupported
	}
	return nil
}

// SetXattr sets attribute name of ino. flags may hold XattrCreate (fail if
// it exists) or XattrReplace (fail if it does not).
func (v *Volume) SetXattr(ctx context.Context, ino uint64, name string, value []byte, flags uint32) error {
	if err := checkXattrName(name); err != nil {
		return err
	}
	if len(value) > MaxXattrValue {
		return ErrRange
	}
	return v.change(func(o *mop) error {
		r, err := o.get(ino)
		if err != nil {
			return err
		}
		i, ok := slices.BinarySearchFunc(r.Xattrs, name, func(x snapshot.Xattr, t string) int { return cmp.Compare(x.Name, t) })
		switch {
		case ok && flags&XattrCreate != 0:
			return ErrExists
		case !ok && flags&XattrReplace != 0:
			return ErrNoAttr
		}
		total := len(name) + len(value)
		for _, x := range r.Xattrs {
			if x.Name != name {
				total += len(x.Name) + len(x.Value)
			}
		}
		if total > MaxXattrsTotal {
			return ErrNoSpace
		}
		x := snapshot.Xattr{Name: name, Value: slices.Clone(value)}
		if ok {
			r.Xattrs[i] = x
		} else {
			r.Xattrs = slices.Insert(r.Xattrs, i, x)
		}
		r.Ctime = o.v.now().UnixNano()
		o.put(r)
		o.markEntry(r)
		return nil
	})
}

// RemoveXattr removes attribute name of ino (ErrNoAttr if unset).
func (v *Volume) RemoveXattr(ctx context.Context, ino uint64, name string) error {
	if err := checkXattrName(name); err != nil {
		if errors.Is(err, ErrNotSupported) {
			return ErrNoAttr
		}
		return err
	}
	return v.change(func(o *mop) error {
		r, err := o.get(ino)
		if err != nil {
			return err
		}
		i, ok := slices.BinarySearchFunc(r.Xattrs, name, func(x snapshot.Xattr, t string) int { return cmp.Compare(x.Name, t) })
		if !ok {
			return ErrNoAttr
		}
		r.Xattrs = slices.Delete(r.Xattrs, i, i+1)
		r.Ctime = o.v.now().UnixNano()
		o.put(r)
		o.markEntry(r)
		return nil
	})
}

// StatFs reports what can really be written to the volume. Every write
// lands in the cache directory first, so the blocks (total, free and
// available, in 4 KiB blocks) are those of the cache directory's
// filesystem, as an overlay reports its upper layer's (the volume's
// logical size is not part of it). Inodes are not limited by the local
// disk (the database holds them): Files is 2^40. It fails only if the
// cache directory's filesystem cannot be asked.
func (v *Volume) StatFs(ctx context.Context) (StatFs, error) {
	const bsize = 4096
	var local unix.Statfs_t
	if err := unix.Statfs(v.files.Dir(), &local); err != nil {
		return StatFs{}, fmt.Errorf("statfs of the cache directory %s: %w", v.files.Dir(), err)
	}
	scale := func(blocks uint64) uint64 { return blocks * uint64(local.Bsize) / bsize }
	var files uint64
	_ = v.readRec(RootIno, func(r *meta.Inode) error {
		files = r.SubFiles
		return nil
	})
	return StatFs{Bsize: bsize, Blocks: scale(local.Blocks), Bfree: scale(local.Bfree), Bavail: scale(local.Bavail),
		Files: 1 << 40, Ffree: 1<<40 - min(files, 1<<40), NameLen: MaxNameLen}, nil
}

// FreeBytes is how many bytes can still be written to the volume: the
// available space of the cache directory's filesystem (StatFs's Bavail).
func (v *Volume) FreeBytes(ctx context.Context) (uint64, error) {
	s, err := v.StatFs(ctx)
	return s.Bavail * uint64(s.Bsize), err
}
