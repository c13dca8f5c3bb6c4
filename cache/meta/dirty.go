package meta

import (
	"fmt"
	"maps"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// DirtySet mirrors in memory the tree marks ('t' keys: directories whose
// trees must be rewritten, with the sequence of their latest mark) and the
// dirty-file index ('w' keys). The keys stay the persistent truth, read back
// once at Open; the mirror answers "what is dirty" without scanning Badger,
// whose prefix scans pay for every deleted key until compaction drops it —
// the cost of history, not of the present.
type DirtySet struct {
	mu    sync.Mutex
	dirs  map[uint64]uint64 // guarded by mu
	files map[uint64]bool   // guarded by mu
}

// Delta collects what one transaction changes in the dirty set; it is
// applied to the mirror after the transaction commits.
type Delta struct {
	marks   map[uint64]uint64 // dir → mark sequence
	unmarks []uint64          // dirs whose marks are deleted
	Files   map[uint64]bool   // ino → dirty (true) or clean (false)
}

// Mark records that dir was marked with sequence seq.
func (d *Delta) Mark(dir, seq uint64) {
	if d.marks == nil {
		d.marks = map[uint64]uint64{}
	}
	d.marks[dir] = seq
}

func (d *Delta) unmark(dir uint64) {
	d.unmarks = append(d.unmarks, dir)
	delete(d.marks, dir)
}

func (d *Delta) file(ino uint64, dirty bool) {
	if d.Files == nil {
		d.Files = map[uint64]bool{}
	}
	d.Files[ino] = dirty
}

// Apply applies a committed transaction's changes to the set.
func (s *DirtySet) Apply(d *Delta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirs == nil {
		s.dirs, s.files = map[uint64]uint64{}, map[uint64]bool{}
	}
	for _, dir := range d.unmarks {
		delete(s.dirs, dir)
	}
	for dir, seq := range d.marks {
		s.dirs[dir] = max(s.dirs[dir], seq)
	}
	for ino, dirty := range d.Files {
		if dirty {
			s.files[ino] = true
		} else {
			delete(s.files, ino)
		}
	}
}

// DirMarks returns a copy of the marked directories.
func (s *DirtySet) DirMarks() map[uint64]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[uint64]uint64, len(s.dirs))
	for k, v := range s.dirs {
		out[k] = v
	}
	return out
}

// MarkSeq returns the sequence of dir's mark, or false.
func (s *DirtySet) MarkSeq(dir uint64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, ok := s.dirs[dir]
	return seq, ok
}

// FileList returns the files with dirty blocks.
func (s *DirtySet) FileList() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, 0, len(s.files))
	for ino := range s.files {
		out = append(out, ino)
	}
	return out
}

// Counts returns how many directories are marked and files dirty.
func (s *DirtySet) Counts() (dirs, files int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dirs), len(s.files)
}

// Any says whether anything is marked or dirty.
func (s *DirtySet) Any() bool {
	d, f := s.Counts()
	return d+f > 0
}

// Load reads the marks and the dirty-file index from the database and
// returns the highest mark sequence.
func (s *DirtySet) Load(db *DB) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirs, s.files = map[uint64]uint64{}, map[uint64]bool{}
	var maxSeq uint64
	err := db.View(func(txn *Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{PrefixTreeMark}, PrefetchValues: true})
		for it.Rewind(); it.Valid(); it.Next() {
			dir := U64(it.Item().Key()[1:])
			_ = it.Item().Value(func(b []byte) error {
				s.dirs[dir] = U64(b)
				maxSeq = max(maxSeq, U64(b))
				return nil
			})
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{Prefix: []byte{PrefixDirtyFile}, PrefetchValues: false})
		for it.Rewind(); it.Valid(); it.Next() {
			s.files[U64(it.Item().Key()[1:])] = true
		}
		it.Close()
		return nil
	})
	return maxSeq, err
}

// Reset empties the set (after the database's marks were dropped).
func (s *DirtySet) Reset() {
	s.mu.Lock()
	s.dirs, s.files = map[uint64]uint64{}, map[uint64]bool{}
	s.mu.Unlock()
}

// SetFileDirty records in txn whether file ino has dirty blocks.
func SetFileDirty(txn *Txn, d *Delta, ino uint64, dirty bool) error {
	var err error
	if dirty {
		err = txn.Set(Key64(PrefixDirtyFile, ino), nil)
	} else {
		err = txn.Delete(Key64(PrefixDirtyFile, ino))
	}
	if err == nil {
		d.file(ino, dirty)
	}
	return err
}

// ClearMark deletes dir's mark in txn.
func ClearMark(txn *Txn, d *Delta, dir uint64) error {
	if err := txn.Delete(Key64(PrefixTreeMark, dir)); err != nil {
		return err
	}
	d.unmark(dir)
	return nil
}

// CheckInvariants returns what of the set's invariant does not hold: it
// mirrors exactly the tree marks and the dirty-file index that db holds.
// The caller holds off every writer of marks (in cache: Volume.markMu and
// what orders before it); the model test calls it after every step.
func (s *DirtySet) CheckInvariants(db *DB) error {
	marks, files := map[uint64]uint64{}, map[uint64]bool{}
	err := db.View(func(txn *Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{PrefixTreeMark}, PrefetchValues: true})
		for it.Rewind(); it.Valid(); it.Next() {
			dir := U64(it.Item().Key()[1:])
			if err := it.Item().Value(func(b []byte) error { marks[dir] = U64(b); return nil }); err != nil {
				it.Close()
				return err
			}
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{Prefix: []byte{PrefixDirtyFile}})
		for it.Rewind(); it.Valid(); it.Next() {
			files[U64(it.Item().Key()[1:])] = true
		}
		it.Close()
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !maps.Equal(marks, s.dirs) {
		return fmt.Errorf("dirty set: marked directories %v, the database's tree marks %v", s.dirs, marks)
	}
	if !maps.Equal(files, s.files) {
		return fmt.Errorf("dirty set: dirty files %v, the database's index %v", s.files, files)
	}
	return nil
}
