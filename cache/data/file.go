package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync/atomic"

	"github.com/agentfs/agentfs/snapshot"
)

// Layout is what the namespace records of one regular file's blocks (in
// package cache, the inode record). A File reads it, never changes it;
// the caller holds whatever lock guards the record.
type Layout interface {
	// Size is the file's size in bytes.
	Size() uint64
	// Inline reports whether the file's local bytes live in memory and
	// the database (a small file: block 0 only), not in a data file.
	Inline() bool
	// IsDirty reports whether block b's local bytes are newer than any
	// chunk.
	IsDirty(b uint64) bool
	// Dirty reports whether any block is dirty.
	Dirty() bool
	// Chunk returns block b's committed chunk, if it has one.
	Chunk(b uint64) (snapshot.BlobRef, bool)
	// OriginSize is how many of the file's first bytes read through to its
	// origin in the lower layer (0: none, or no lower).
	OriginSize() uint64
	// Origin is the path of the file's origin in the lower layer (when
	// OriginSize is not 0).
	Origin() string
}

// OriginFile is a file's origin in the lower layer, open for reading: the
// block source of the blocks the file has neither changed nor committed.
type OriginFile interface {
	io.ReaderAt
	io.Closer
}

// Origins is the lower layer as a block source: it opens the file at an
// origin path (relative to the lower's root) for reading.
type Origins interface {
	Open(ctx context.Context, origin string) (OriginFile, error)
}

// Sources is what the Files of one volume share: their data files, the
// block cache that counts their clean blocks, the lower layer their
// origins are in, and the block size. Its fields are set before the first
// File is made and never change.
type Sources struct {
	Files     *Files
	Cache     *Cache
	Lower     Origins // nil: no lower layer (origin blocks read as zeros)
	BlockSize uint64
}

// EvictClosed drops the clean blocks of file ino, which is not open.
// update runs its function once, in one transaction of the caller's
// database that it commits if the function returns nil, with the file's
// record (nil if the file has none: it is gone) and the transaction's
// records: there the presence record is read and, if the file has one,
// deleted, with an inline file's inline bytes unless block 0 is dirty (an
// inline file's clean bytes are its inline record). What is read is what
// is deleted (the caller keeps other writers of the file's records out
// while update runs). A crash after the commit leaves clean bytes of
// blocks not recorded present (fetched again when read), never a block
// recorded present that reads as zeros. Then the block cache stops
// counting the file, and, if it had a presence record, its data file goes,
// or, if the file has dirty blocks, has the present blocks punched out. An
// inline file has no data file. The data file of a file without a record
// stays: it is its deletion's to remove (DropDeleted), once the deletion
// is durable, or, after a crash, the recovery's.
func (s *Sources) EvictClosed(ino uint64, update func(func(Layout, RecordsTxn) error) error) error {
	var l Layout
	var present []uint64
	held := false
	err := update(func(rl Layout, r RecordsTxn) error {
		if l = rl; l == nil {
			return nil
		}
		var err error
		if present, held, err = StoredPresence(r, ino); err != nil || !held {
			return err
		}
		if l.Inline() && !l.IsDirty(0) {
			if err := r.SetInline(ino, nil); err != nil {
				return err
			}
		}
		return r.SetPresence(ino, nil)
	})
	if err != nil {
		return err
	}
	s.Cache.Drop(ino)
	switch {
	case !held, l.Inline():
		return nil
	case !l.Dirty():
		return s.Files.Remove(ino)
	}
	return s.Files.PunchFile(ino, present, s.BlockSize, false, 0)
}

// DropDeleted forgets the clean blocks of deleted file ino at once (the
// block cache stops counting them) and removes its data file through
// after, which runs its function once the deletion (committed before the
// call) is durable in the caller's database: until then a crash would
// bring the file back, and it needs its data.
func (s *Sources) DropDeleted(ino uint64, after func(func())) {
	s.Cache.Drop(ino)
	after(func() { _ = s.Files.Remove(ino) })
}

// Records is where a File's two records persist (in package cache, a
// transaction of the database). A nil value deletes the record.
type Records interface {
	// SetInline stores the inline bytes of file ino.
	SetInline(ino uint64, b []byte) error
	// SetPresence stores the presence record of file ino.
	SetPresence(ino uint64, b []byte) error
}

// Stored reads a File's two records back (in package cache, from a
// transaction of the database): each returns a copy of the record, or
// false if it is absent.
type Stored interface {
	// Inline returns the inline bytes of file ino.
	Inline(ino uint64) ([]byte, bool, error)
	// Presence returns the presence record of file ino.
	Presence(ino uint64) ([]byte, bool, error)
}

// RecordsTxn reads and writes a File's two records in one transaction of
// the caller's database.
type RecordsTxn interface {
	Records
	Stored
}

// StoredPresence returns the blocks that the presence record of file ino,
// read through r, lists; false if it has none.
func StoredPresence(r Stored, ino uint64) ([]uint64, bool, error) {
	b, ok, err := r.Presence(ino)
	if err != nil || !ok {
		return nil, false, err
	}
	return DecodePresence(b), true, nil
}

// ErrInlineMissing is an inline file whose block 0 is present or dirty and
// whose inline bytes are not stored.
var ErrInlineMissing = errors.New("inline bytes are missing")

// LoadFile returns the data state of file ino, whose record is l, from its
// stored records: the blocks its presence record lists (which the block
// cache counts already), and, for an inline file whose block 0 is present
// or dirty, its inline bytes (ErrInlineMissing if they are not stored).
func (s *Sources) LoadFile(ino uint64, l Layout, r Stored) (*File, error) {
	present, _, err := StoredPresence(r, ino)
	if err != nil {
		return nil, err
	}
	var inline []byte
	if l.Inline() && (slices.Contains(present, 0) || l.IsDirty(0)) {
		b, ok, err := r.Inline(ino)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: inode %d", ErrInlineMissing, ino)
		}
		inline = b
	}
	return NewFile(s, ino, present, inline), nil
}

// Source says where a block's bytes come from.
type Source int

// Where a block's bytes come from, in the order File.Source decides.
const (
	Hole   Source = iota // none of the others: zeros
	Local                // local bytes: dirty, or present (a clean copy)
	Remote               // a committed chunk not present locally (the store)
	Lower                // the origin file in the lower layer
)

// File is the local data state of one regular file: which clean blocks it
// holds (present), its local bytes (a data file, or in memory for an
// inline file), and its origin file in the lower layer, opened on first
// need (through Sources.Lower). It reads a block from where its bytes
// are, installs fetched or copied-up blocks, and keeps the block cache's
// count of its present blocks (Sources.Cache): every change of the present
// blocks changes the count by their extents within the file, and so does
// a change of the file's size that changes a present block's extent (Grow, Replace).
//
// Invariants (CheckInvariants): a present block is neither dirty nor past
// the file's end; an inline file holds at most block 0 present, and its
// bytes are no longer than the file; the block cache counts exactly the
// extents of its present blocks at the file's size; a pinned file (Pin) is
// not inline and is Whole, its data file open and no shorter than the
// file. Data-file bytes outside
// dirty and present blocks, and past the file's size, are zeros (holes):
// Cut and Evict cut and punch them (the caller, for other changes), and
// reads of holes rely on it.
//
// A File is not safe for concurrent use: its caller guards it with the
// lock of the file's record (in cache, node.mu; read-locked for the
// methods that only read), except NoteRead, which is atomic.
type File struct {
	src *Sources
	ino uint64
	bs  uint64 // block size

	present       map[uint64]bool // clean blocks held locally
	presenceDirty bool            // present differs from the presence record
	inline        []byte          // inline files: block 0's bytes when present or dirty
	inlineDirty   bool            // inline holds bytes the database does not
	f             *os.File        // the data file, opened on first need
	origin        OriginFile      // the origin file, opened on first need
	lastFetched   uint64          // 1 + the block installed last (0: none), kept from eviction
	pins          int             // passthrough readers of the data file (Pin)

	lastEnd atomic.Uint64 // end of the last read, for read-ahead and eviction
}

// NewFile returns the data state of inode ino, whose presence record lists
// present (counted by src.Cache already) and whose inline bytes (for an
// inline file) are inline.
func NewFile(src *Sources, ino uint64, present []uint64, inline []byte) *File {
	d := &File{src: src, ino: ino, bs: src.BlockSize, present: make(map[uint64]bool, len(present)), inline: inline}
	for _, b := range present {
		d.present[b] = true
	}
	return d
}

// Source tells where block b's bytes come from.
func (d *File) Source(l Layout, b uint64) Source {
	if d.present[b] || l.IsDirty(b) {
		return Local
	}
	if _, has := l.Chunk(b); has {
		return Remote
	}
	if b*d.bs < l.OriginSize() {
		return Lower
	}
	return Hole
}

// IsPresent reports whether clean block b is held locally.
func (d *File) IsPresent(b uint64) bool { return d.present[b] }

// Present returns a copy of the set of present blocks.
func (d *File) Present() map[uint64]bool { return maps.Clone(d.present) }

// Unpresent makes block b not present (it became dirty) in a file of size
// size, and the block cache stops counting it.
func (d *File) Unpresent(b, size uint64) {
	if freed := d.unpresent(b, size); freed > 0 {
		d.src.Cache.Add(d.ino, -freed)
	}
}

// unpresent makes block b not present and returns its extent (0 if it was
// not present), which the caller takes out of the block cache's count.
func (d *File) unpresent(b, size uint64) int64 {
	if !d.present[b] {
		return 0
	}
	delete(d.present, b)
	d.presenceDirty = true
	return d.extent(b, size)
}

// AddPresent makes blocks present: they were dirty, and a commit now
// holds their local bytes as their chunks. The caller has stored the
// presence record of the present blocks and these (the presence is
// persisted); the block cache counts their extents within the file, of
// size size (and an access to it, even for no block).
func (d *File) AddPresent(blocks []uint64, size uint64) {
	var added int64
	for _, b := range blocks {
		if !d.present[b] {
			d.present[b] = true
			added += d.extent(b, size)
		}
	}
	d.presenceDirty = false
	d.src.Cache.Add(d.ino, added)
}

// Grow counts in the block cache what a file growing from old to size
// bytes adds to its present blocks: the block that held its old end, if
// present, now extends to the new end or its own (its bytes past old read
// as zeros, a hole of the data file). The caller calls it as the record's
// size grows, so that the count stays the extents of the present blocks at
// the file's size, which is what an eviction or a write later takes out.
func (d *File) Grow(old, size uint64) {
	if size <= old || old%d.bs == 0 || !d.present[old/d.bs] {
		return
	}
	b := old / d.bs
	d.src.Cache.Add(d.ino, d.extent(b, size)-d.extent(b, old))
}

// Replace drops the local bytes of every block but the present ones in
// keep, for a file whose blocks change under it (a reconcile brings it to
// another commit's entry, whose chunks are unchanged for the blocks in
// keep): l is its record before the change and size its new size. The
// present blocks not kept stop being present and counted in the block
// cache (which counts an access to the file, even for no block; a kept
// block counts its extent at the new size), and the inline bytes go unless
// block 0 is kept. A data file has those blocks
// and l's dirty ones punched out and is cut to size, or, when nothing is
// kept and the file is not pinned, is closed and removed. The caller
// stores the records (the presence record, PresenceRecord; the inline
// bytes, deleted unless block 0 is kept) and then calls Persisted.
func (d *File) Replace(l Layout, keep map[uint64]bool, size uint64) error {
	var drop []uint64
	var freed int64
	for b := range d.present {
		if !keep[b] {
			drop = append(drop, b)
			freed += d.unpresent(b, l.Size())
		} else {
			freed += d.extent(b, l.Size()) - d.extent(b, size)
		}
	}
	d.src.Cache.Add(d.ino, -freed)
	if l.Inline() {
		if !keep[0] {
			d.inline, d.inlineDirty = nil, false
		}
		return nil
	}
	if len(keep) == 0 && d.pins == 0 {
		d.Close()
		return d.src.Files.Remove(d.ino)
	}
	// Bytes of blocks neither present nor dirty must read as zeros.
	for b := uint64(0); b*d.bs < l.Size(); b++ {
		if l.IsDirty(b) {
			drop = append(drop, b)
		}
	}
	f, err := d.OpenData(false)
	if err != nil || f == nil {
		return err
	}
	if err := Punch(f, drop, d.bs); err != nil {
		return err
	}
	if err := f.Truncate(int64(size)); err != nil {
		return fmt.Errorf("cache data file: %w", err)
	}
	return nil
}

// extent is Extent for d's block size.
func (d *File) extent(b, size uint64) int64 { return Extent(b, size, d.bs) }

// Extent is the bytes of block b (of bs bytes) within a file of size size:
// what the block cache counts for the block when it is present.
func Extent(b, size, bs uint64) int64 {
	return int64(min(bs, size-min(size, b*bs)))
}

// Forget drops every local copy of the file's bytes (the origin changed
// under them; the file has no dirty blocks): the present blocks, which the
// block cache stops counting, the inline bytes and the data file. The
// caller deletes the records (ForgetRecords).
func (d *File) Forget() error {
	d.present = map[uint64]bool{}
	d.inline = nil
	d.src.Cache.Drop(d.ino)
	if d.f != nil {
		_ = d.f.Close()
		d.f = nil
	}
	return d.src.Files.Remove(d.ino)
}

// ForgetRecords deletes through r the records of the local copies Forget
// dropped: the inline bytes and the presence record.
func (d *File) ForgetRecords(r Records) error {
	if err := r.SetInline(d.ino, nil); err != nil {
		return err
	}
	return r.SetPresence(d.ino, nil)
}

// PresenceDirty reports whether the present blocks differ from the
// presence record; InlineDirty whether the inline bytes differ from the
// database's.
func (d *File) PresenceDirty() bool { return d.presenceDirty }

// InlineDirty reports whether the inline bytes differ from the database's.
func (d *File) InlineDirty() bool { return d.inlineDirty }

// Persisted records that the presence record and the inline bytes in the
// database are those held here.
func (d *File) Persisted() { d.presenceDirty, d.inlineDirty = false, false }

// PresenceRecord returns the encoded presence record (nil: no block is
// present, the record goes).
func (d *File) PresenceRecord() []byte {
	if len(d.present) == 0 {
		return nil
	}
	return EncodePresence(d.present)
}

// Persist writes to r what of the file's records differs from the held
// state: for an inline file its inline bytes (deleted when block 0 is
// neither present nor dirty), and the presence record. The caller calls
// Persisted once r's writes are committed.
func (d *File) Persist(l Layout, r Records) error {
	if l.Inline() && (d.inlineDirty || d.presenceDirty) {
		var b []byte
		if d.present[0] || l.IsDirty(0) {
			b = slices.Clone(d.inline)
			if b == nil {
				b = []byte{}
			}
		}
		if err := r.SetInline(d.ino, b); err != nil {
			return err
		}
	}
	if d.presenceDirty {
		return r.SetPresence(d.ino, d.PresenceRecord())
	}
	return nil
}

// SetInline replaces the inline bytes (taken, not copied) and records
// whether the database lacks them.
func (d *File) SetInline(b []byte, dirty bool) { d.inline, d.inlineDirty = b, dirty }

// writeInline writes p at off into the inline bytes, growing them.
func (d *File) writeInline(p []byte, off uint64) {
	end := off + uint64(len(p))
	if uint64(len(d.inline)) < end {
		d.inline = append(d.inline, make([]byte, end-uint64(len(d.inline)))...)
	}
	copy(d.inline[off:], p)
	d.inlineDirty = true
}

// Write writes p at off into the local bytes: the inline bytes of an
// inline file, else the data file (created if needed). The caller has made
// the blocks written dirty.
func (d *File) Write(l Layout, p []byte, off uint64) error {
	if l.Inline() {
		d.writeInline(p, off)
		return nil
	}
	f, err := d.OpenData(true)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(p, int64(off)); err != nil {
		return fmt.Errorf("cache data file: %w", err)
	}
	return nil
}

// MoveInline writes the inline bytes to a data file of their own, created
// empty, for a file that stops being inline. The caller records that, and
// then drops the inline bytes (SetInline(nil, false)).
func (d *File) MoveInline() error {
	f, err := d.OpenData(true)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("cache data file: %w", err)
	}
	if len(d.inline) > 0 {
		if _, err := f.WriteAt(d.inline, 0); err != nil {
			return fmt.Errorf("cache data file: %w", err)
		}
	}
	return nil
}

// Cut shortens the local bytes to size, for a file whose record still has
// its old size (l.Size(), larger): the blocks wholly past size stop being
// present (and counted), and the inline bytes or the data file are cut.
func (d *File) Cut(l Layout, size uint64) error {
	old := l.Size()
	keep := (size + d.bs - 1) / d.bs // blocks [0, keep) survive
	var freed int64
	for b := range d.present {
		if b >= keep {
			freed += d.unpresent(b, old)
		}
	}
	if freed > 0 {
		d.src.Cache.Add(d.ino, -freed)
	}
	if l.Inline() {
		if uint64(len(d.inline)) > size {
			d.inline = d.inline[:size]
		}
		if size == 0 {
			d.inline = nil
		}
		d.inlineDirty = true
		return nil
	}
	f, err := d.OpenData(false)
	if err != nil || f == nil {
		return err
	}
	if err := f.Truncate(int64(size)); err != nil {
		return fmt.Errorf("cache data file: %w", err)
	}
	return nil
}

// DataFile returns the open data file, or nil if it is not open.
func (d *File) DataFile() *os.File { return d.f }

// OpenData returns the data file, opening (and with create, creating) it;
// nil if it does not exist and create is false.
func (d *File) OpenData(create bool) (*os.File, error) {
	if d.f != nil {
		return d.f, nil
	}
	f, err := d.src.Files.Open(d.ino, create)
	if err != nil || f == nil {
		return nil, err
	}
	d.f = f
	return f, nil
}

// NeedsData reports whether reading local bytes needs the data file opened
// first: the file is not inline, the data file is not open, and some block
// is present or dirty.
func (d *File) NeedsData(l Layout) bool {
	return !l.Inline() && d.f == nil && (len(d.present) > 0 || l.Dirty())
}

// HasOrigin reports whether the origin file is open.
func (d *File) HasOrigin() bool { return d.origin != nil }

// OpenOrigin opens the origin file in the lower layer, unless it is open
// or there is none (no lower layer, or no byte of the file reads through
// to it: its blocks read as zeros). An error wraps ErrOrigin.
func (d *File) OpenOrigin(ctx context.Context, l Layout) error {
	if d.origin != nil || d.src.Lower == nil || l.OriginSize() == 0 {
		return nil
	}
	f, err := d.src.Lower.Open(ctx, l.Origin())
	if err != nil {
		return fmt.Errorf("%w: open %q: %w", ErrOrigin, l.Origin(), err)
	}
	d.origin = f
	return nil
}

// Close closes the data file and the origin file (they reopen on next
// need).
func (d *File) Close() {
	if d.f != nil {
		_ = d.f.Close()
		d.f = nil
	}
	if d.origin != nil {
		_ = d.origin.Close()
		d.origin = nil
	}
}

// ErrOrigin wraps a failure to open or read the origin file.
var ErrOrigin = errors.New("reading the origin in the lower layer")

// ReadRange reads p at off, block by block from where each block's bytes
// are: the local bytes (holes read as zeros from them), or the origin
// file. Remote blocks must have been made present; lower blocks need the
// origin file open (else they read as zeros).
func (d *File) ReadRange(l Layout, p []byte, off uint64) error {
	for len(p) > 0 {
		// A run of blocks with the same kind of source: one read.
		lower := d.Source(l, off/d.bs) == Lower
		end := off + uint64(len(p))
		for b := off/d.bs + 1; b*d.bs < end; b++ {
			if (d.Source(l, b) == Lower) != lower {
				end = b * d.bs
				break
			}
		}
		seg := p[:end-off]
		var err error
		if lower {
			err = d.ReadOrigin(l, seg, off)
		} else {
			err = d.ReadLocal(l, seg, off)
		}
		if err != nil {
			return err
		}
		p, off = p[len(seg):], end
	}
	return nil
}

// ReadOrigin reads p at off from the origin file: bytes at or past the
// origin's size (or past the origin file's end) read as zeros. An error
// wraps ErrOrigin.
func (d *File) ReadOrigin(l Layout, p []byte, off uint64) error {
	got := 0
	if size := l.OriginSize(); d.origin != nil && off < size {
		want := p[:min(uint64(len(p)), size-off)]
		var err error
		got, err = d.origin.ReadAt(want, int64(off))
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: read %q: %w", ErrOrigin, l.Origin(), err)
		}
	}
	clear(p[got:])
	return nil
}

// ReadLocal reads p at off from the local bytes; bytes not held read as
// zeros.
func (d *File) ReadLocal(l Layout, p []byte, off uint64) error {
	if l.Inline() {
		got := 0
		if off < uint64(len(d.inline)) {
			got = copy(p, d.inline[off:])
		}
		clear(p[got:])
		return nil
	}
	if d.f == nil {
		clear(p)
		return nil
	}
	got, err := d.f.ReadAt(p, int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("cache data file: %w", err)
	}
	clear(p[got:])
	return nil
}

// CopyUp copies block b, which reads through to the origin (Source is
// Lower), from the origin file (opened if it is not open) and installs it
// (up to the origin's size; zeros after). An error reading the origin
// wraps ErrOrigin.
func (d *File) CopyUp(ctx context.Context, l Layout, b uint64) error {
	if err := d.OpenOrigin(ctx, l); err != nil {
		return err
	}
	start := b * d.bs
	p := make([]byte, min(d.bs, l.OriginSize()-start))
	if err := d.ReadOrigin(l, p, start); err != nil {
		return err
	}
	return d.Install(l, b, p)
}

// InstallChunk installs p, the bytes of chunk ref fetched for block b,
// unless the block changed while it was fetched: it is present or dirty,
// or its chunk is no longer ref.
func (d *File) InstallChunk(l Layout, b uint64, ref snapshot.BlobRef, p []byte) error {
	cur, has := l.Chunk(b)
	if d.present[b] || l.IsDirty(b) || !has || cur != ref {
		return nil
	}
	return d.Install(l, b, p)
}

// Install stores p as the local bytes of block b and marks it present; the
// block cache counts its extent within the file (bytes past p read as
// zeros).
func (d *File) Install(l Layout, b uint64, p []byte) error {
	start := b * d.bs
	extent := min(d.bs, l.Size()-start)
	buf := p
	if uint64(len(buf)) > extent {
		buf = buf[:extent]
	}
	if l.Inline() {
		d.inline = slices.Clone(buf)
	} else {
		if uint64(len(buf)) < extent {
			buf = append(slices.Clip(buf), make([]byte, extent-uint64(len(buf)))...)
		}
		f, err := d.OpenData(true)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(buf, int64(start)); err != nil {
			return fmt.Errorf("cache data file: %w", err)
		}
	}
	d.present[b] = true
	d.presenceDirty = true
	d.lastFetched = b + 1
	d.src.Cache.Add(d.ino, int64(extent)) // an inline file's shorter bytes too: its block reads as extent bytes
	return nil
}

// NoteRead records that a read of [off, end) is done, counts an access to
// the file in the block cache (Cache.Access: evicting in the caller if the
// cache is far over its limit), and reports whether the read began where
// the previous one ended (a sequential reader). Safe for concurrent use;
// the caller holds no lock (an eviction takes them).
func (d *File) NoteRead(ctx context.Context, off, end uint64) bool {
	seq := d.lastEnd.Swap(end) == off
	d.src.Cache.Access(ctx, d.ino)
	return seq
}

// firstFrom returns the first block of [off, end) whose bytes come from
// src; false if none does (or end <= off).
func (d *File) firstFrom(l Layout, off, end uint64, src Source) (uint64, bool) {
	if end <= off {
		return 0, false
	}
	for b := off / d.bs; b <= (end-1)/d.bs; b++ {
		if d.Source(l, b) == src {
			return b, true
		}
	}
	return 0, false
}

// partial returns the first block that a write of [off, end) covers only
// in part (not every byte of it within the file) and that must be made
// present before: remote (its old bytes are fetched), or still in the
// lower layer (copied up); false if there is none (or end <= off). A
// truncation to size is a write of [size, the file's end): the block it
// cuts in two.
func (d *File) partial(l Layout, off, end uint64) (uint64, bool) {
	if end <= off {
		return 0, false
	}
	for b := off / d.bs; b <= (end-1)/d.bs; b++ {
		if s := d.Source(l, b); (s == Remote || s == Lower) && !d.covers(off, end, b, l.Size()) {
			return b, true
		}
	}
	return 0, false
}

// covers reports whether [off, end) overwrites every byte of block b that
// a file of size size holds.
func (d *File) covers(off, end, b, size uint64) bool {
	start := b * d.bs
	stop := min(start+d.bs, max(size, start))
	return off <= start && end >= stop
}

// open opens the data file if it exists and, with origin, the origin
// file (OpenOrigin).
func (d *File) open(ctx context.Context, l Layout, origin bool) error {
	if _, err := d.OpenData(false); err != nil || !origin {
		return err
	}
	return d.OpenOrigin(ctx, l)
}

// RemoteFrom returns the remote blocks among the n blocks from b on (within
// the file): what read-ahead fetches.
func (d *File) RemoteFrom(l Layout, b uint64, n int) []uint64 {
	var todo []uint64
	for i := b; i < b+uint64(n) && i*d.bs < l.Size(); i++ {
		if d.Source(l, i) == Remote {
			todo = append(todo, i)
		}
	}
	return todo
}

// Evict drops the present blocks an eviction may (Evictable), none while
// the file is pinned: they stop
// being present, persist records that (the caller's persistence of the
// presence record), and then they are punched out of the data file and the
// block cache stops counting them. If persist fails they stay present. A
// reader that finds a block gone fetches it again; the caller holds the
// lock readers take, so none reads a punched block as zeros.
func (d *File) Evict(l Layout, readAhead int, persist func() error) error {
	if d.pins > 0 {
		return nil // the kernel reads the data file (Pin)
	}
	drop := d.Evictable(l, readAhead)
	if len(drop) == 0 {
		return nil
	}
	var freed int64
	for _, b := range drop {
		freed += d.unpresent(b, l.Size())
	}
	if err := persist(); err != nil {
		for _, b := range drop {
			d.present[b] = true
		}
		d.presenceDirty = true
		return err
	}
	f, err := d.OpenData(false)
	if err == nil && f != nil {
		// A block not punched is not present any more either: a later
		// fetch overwrites its bytes.
		err = Punch(f, drop, d.bs)
	}
	d.src.Cache.Add(d.ino, -freed)
	return err
}

// Evictable returns the present blocks an eviction may drop: all but those
// a reader is about to use — the blocks around the end of the last read and
// the readAhead blocks after it, and the block installed last (a reader
// between its fetch and its read). None for an inline file.
func (d *File) Evictable(l Layout, readAhead int) []uint64 {
	if l.Inline() {
		return nil
	}
	cur := d.lastEnd.Load() / d.bs
	var drop []uint64
	for b := range d.present {
		near := (b+1 >= cur && b <= cur+uint64(readAhead)) || b+1 == d.lastFetched
		if !near && !l.IsDirty(b) {
			drop = append(drop, b)
		}
	}
	slices.Sort(drop)
	return drop
}

// CheckInvariants returns what of File's invariants does not hold against
// l, the file's record: no present block is dirty or wholly past the end,
// an inline file holds at most block 0 present and no more bytes than its
// size, and the block cache counts for the file exactly the extents of its
// present blocks at its size (each change of either recounts: an install,
// AddPresent, Unpresent, Cut, Evict, Replace, and Grow as the file grows);
// a pinned file is not inline, is Whole, and its data file is open and no
// shorter than the file. The caller holds the record's lock.
func (d *File) CheckInvariants(l Layout) error {
	size := l.Size()
	var held int64
	for b := range d.present {
		held += d.extent(b, size)
		switch {
		case l.IsDirty(b):
			return fmt.Errorf("file %d: block %d is both present and dirty", d.ino, b)
		case b*d.bs >= size:
			return fmt.Errorf("file %d: block %d is present past the end (size %d)", d.ino, b, size)
		case l.Inline() && b != 0:
			return fmt.Errorf("file %d: inline, yet block %d is present", d.ino, b)
		}
	}
	if l.Inline() && uint64(len(d.inline)) > size {
		return fmt.Errorf("file %d: %d inline bytes for a size of %d", d.ino, len(d.inline), size)
	}
	if c := d.src.Cache.Bytes(d.ino); c != held {
		return fmt.Errorf("file %d: the block cache counts %d bytes, its present blocks hold %d", d.ino, c, held)
	}
	return d.checkPinned(l)
}

// checkPinned checks a pinned file: it is not inline, it is whole in its
// data file (Whole), and the data file is open and no shorter than the
// file.
func (d *File) checkPinned(l Layout) error {
	if d.pins == 0 {
		return nil
	}
	switch {
	case l.Inline():
		return fmt.Errorf("file %d: pinned, yet inline", d.ino)
	case !d.Whole(l):
		return fmt.Errorf("file %d: pinned, yet not whole in its data file", d.ino)
	case d.f == nil:
		return fmt.Errorf("file %d: pinned, yet its data file is not open", d.ino)
	case !d.src.Cache.IsPinned(d.ino):
		return fmt.Errorf("file %d: pinned, yet not in the block cache's pins", d.ino)
	}
	st, err := d.f.Stat()
	if err != nil {
		return fmt.Errorf("file %d: %w", d.ino, err)
	}
	if st.Size() < int64(l.Size()) {
		return fmt.Errorf("file %d: pinned, its data file has %d bytes, the file %d", d.ino, st.Size(), l.Size())
	}
	return nil
}
