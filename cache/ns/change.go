package ns

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// RootIno is the inode number of the volume's root directory.
const RootIno uint64 = 1

// Limits of names and attributes.
const (
	MaxNameLen     = 255
	MaxXattrName   = 255
	MaxXattrValue  = 64 << 10
	MaxXattrsTotal = 1 << 20 // all attributes of one inode together
)

// Host is what the engine supplies to the namespace: the open files,
// whose in-memory records are the authoritative ones while they are open,
// the lower layer's view of a record, inode numbers, the clock, the
// ordering of mark writers, and what a deleted inode's data means. Its
// methods are called with the namespace lock held (see Namespace.Change),
// shared by reads.
type Host interface {
	// LockOpen returns the open file of inode ino with its record's lock
	// held, or nil if ino is not open.
	LockOpen(ino uint64) OpenFile
	// ViewOpen calls fn with the in-memory record of inode ino, under the
	// record's lock held shared, if ino is open, and reports whether it
	// is. fn does not change or keep the record.
	ViewOpen(ino uint64, fn func(r *meta.Inode)) bool
	// OpenCount returns how many users hold inode ino open.
	OpenCount(ino uint64) int
	// Modified records in r that it differs from the lower layer, if
	// there is one (its Mod flag).
	Modified(r *meta.Inode)
	// AllocIno returns a fresh inode number, never used before in this
	// database.
	AllocIno() (uint64, error)
	// Now returns the current time in nanoseconds since the Unix epoch.
	Now() int64
	// CommitMarked writes a tree mark for each directory of dirs in txn,
	// commits txn and then applies d (with the marks) to the dirty set,
	// ordered against every other writer and reader of marks.
	CommitMarked(txn *meta.Txn, d *meta.Delta, dirs map[uint64]bool) error
	// Deleted is told, after the change that deleted inode ino committed,
	// which of its blocks were dirty: its data goes.
	Deleted(ino uint64, dirty []uint64)
}

// OpenFile is an open file's in-memory record, whose lock a change holds
// from its first read of the record to its end.
type OpenFile interface {
	// Record returns the in-memory record (not to be changed in place).
	Record() *meta.Inode
	// Install makes r the in-memory record.
	Install(r *meta.Inode)
	// Unlock releases the record's lock.
	Unlock()
}

// Namespace runs namespace changes on a metadata database.
type Namespace struct {
	db        *meta.DB
	host      Host
	emptyTree snapshot.Hash
}

// New returns the namespace of db. emptyTree is the hash of the empty
// tree (a directory whose tree has it has no entries, loaded or not).
func New(db *meta.DB, host Host, emptyTree snapshot.Hash) *Namespace {
	return &Namespace{db: db, host: host, emptyTree: emptyTree}
}

// Change is one namespace change, in one database transaction. Records
// are read through it (Get: the in-memory record of an open file, whose
// lock is then held until the end of the change), changed on private
// copies, and installed only when the transaction commits.
type Change struct {
	ns    *Namespace
	txn   *meta.Txn
	recs  map[uint64]*meta.Inode // private copies read so far
	dirty map[uint64]bool        // copies to write
	files map[uint64]OpenFile    // open files whose lock this change holds
	marks map[uint64]bool        // directories whose trees must be rewritten
	after []func()               // run after a successful commit
	d     meta.Delta             // dirty-set changes besides marks
}

// Change runs fn as one namespace change and commits it if fn succeeds.
// The caller holds the namespace lock exclusively: changes are not
// checked for conflicts (meta.Txn detects none), the lock orders them.
func (s *Namespace) Change(fn func(c *Change) error) error {
	c := &Change{ns: s, txn: s.db.NewTransaction(true), recs: map[uint64]*meta.Inode{}, dirty: map[uint64]bool{},
		files: map[uint64]OpenFile{}, marks: map[uint64]bool{}}
	defer func() {
		c.txn.Discard()
		for _, f := range c.files {
			f.Unlock()
		}
	}()
	if err := fn(c); err != nil {
		return err
	}
	return c.commit()
}

// Txn returns the change's transaction, for keys besides records.
func (c *Change) Txn() *meta.Txn { return c.txn }

// Delta returns the change's dirty-set changes besides marks, for
// meta.SetFileDirty and meta.ClearMark.
func (c *Change) Delta() *meta.Delta { return &c.d }

// Now returns the host's clock in nanoseconds.
func (c *Change) Now() int64 { return c.ns.host.Now() }

// After runs fn once the change has committed.
func (c *Change) After(fn func()) { c.after = append(c.after, fn) }

// Get returns the private copy of inode ino's record.
func (c *Change) Get(ino uint64) (*meta.Inode, error) {
	if r, ok := c.recs[ino]; ok {
		return r, nil
	}
	if f, held := c.files[ino]; held {
		r := f.Record().Clone()
		c.recs[ino] = r
		return r, nil
	}
	if f := c.ns.host.LockOpen(ino); f != nil {
		c.files[ino] = f
		r := f.Record().Clone()
		c.recs[ino] = r
		return r, nil
	}
	r, err := ReadInode(c.txn, ino)
	if err != nil {
		return nil, err
	}
	c.recs[ino] = r
	return r, nil
}

// Put schedules r to be written. A changed inode differs from its lower
// layer (Host.Modified).
func (c *Change) Put(r *meta.Inode) {
	c.recs[r.Ino] = r
	c.dirty[r.Ino] = true
	c.ns.host.Modified(r)
}

// MarkEntry records that r's own attributes changed: the tree holding its
// entry must be rewritten.
func (c *Change) MarkEntry(r *meta.Inode) {
	switch {
	case r.LinkID != 0:
		c.marks[meta.LinkTableDir] = true
	case r.Ino == RootIno:
		c.marks[RootIno] = true
	case r.Parent != 0:
		c.marks[r.Parent] = true
	}
}

// MarkDir records that dir's entries changed.
func (c *Change) MarkDir(dir uint64) { c.marks[dir] = true }

// unmarkDir clears dir's mark (a directory that goes).
func (c *Change) unmarkDir(dir uint64) error {
	if err := meta.ClearMark(c.txn, &c.d, dir); err != nil {
		return err
	}
	delete(c.marks, dir)
	return nil
}

func (c *Change) commit() error {
	for ino := range c.dirty {
		if err := c.txn.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(c.recs[ino])); err != nil {
			return err
		}
	}
	if err := c.ns.host.CommitMarked(c.txn, &c.d, c.marks); err != nil {
		return err
	}
	for ino, f := range c.files {
		if c.dirty[ino] {
			f.Install(c.recs[ino])
		}
	}
	for _, f := range c.after {
		f()
	}
	return nil
}

// LookupChild returns the inode number and type of parent/name in the
// change's transaction.
func (c *Change) LookupChild(parent uint64, name string) (uint64, snapshot.EntryType, error) {
	return GetDentry(c.txn, parent, name)
}

// GetDentry returns the inode number and type of parent/name in txn
// (ErrNotFound if there is no such entry).
func GetDentry(txn *meta.Txn, parent uint64, name string) (uint64, snapshot.EntryType, error) {
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

// ReadInode returns the stored record of inode ino in txn (ErrNotFound if
// there is none, ErrIO if it does not decode).
func ReadInode(txn *meta.Txn, ino uint64) (*meta.Inode, error) {
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

// DirRec returns the record of directory ino, which must be loaded
// (a *NotLoadedError otherwise).
func (c *Change) DirRec(ino uint64) (*meta.Inode, error) {
	r, err := c.Get(ino)
	if err != nil {
		return nil, err
	}
	if r.Type != snapshot.TypeDir {
		return nil, ErrNotDir
	}
	if !r.Loaded {
		return nil, &NotLoadedError{Ino: ino}
	}
	return r, nil
}

// NotLoadedError tells the caller of a change to load directory Ino (from
// its stored tree) and retry the change; it never leaves the engine.
type NotLoadedError struct{ Ino uint64 }

func (e *NotLoadedError) Error() string { return fmt.Sprintf("directory %d not loaded", e.Ino) }

// CheckName fails with ErrNameTooLong or ErrInvalid unless name can be a
// new entry's name.
func CheckName(name string) error {
	if len(name) > MaxNameLen {
		return ErrNameTooLong
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return ErrInvalid
	}
	return nil
}

func newLinkID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := meta.U64(b[:]); id != 0 {
			return id
		}
	}
}
