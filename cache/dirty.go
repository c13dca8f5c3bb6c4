package cache

import (
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// dirtySet mirrors in memory the tree marks ('t' keys: directories whose
// trees must be rewritten, with the sequence of their latest mark) and the
// dirty-file index ('w' keys). The keys stay the persistent truth, read back
// once at Open; the mirror answers "what is dirty" without scanning Badger,
// whose prefix scans pay for every deleted key until compaction drops it —
// the cost of history, not of the present.
type dirtySet struct {
	mu    sync.Mutex
	dirs  map[uint64]uint64 // guarded by mu
	files map[uint64]bool   // guarded by mu
}

// delta collects what one transaction changes in the dirty set; it is
// applied to the mirror after the transaction commits.
type delta struct {
	marks   map[uint64]uint64 // dir → mark sequence
	unmarks []uint64          // dirs whose marks are deleted
	files   map[uint64]bool   // ino → dirty (true) or clean (false)
}

func (d *delta) mark(dir, seq uint64) {
	if d.marks == nil {
		d.marks = map[uint64]uint64{}
	}
	d.marks[dir] = seq
}

func (d *delta) unmark(dir uint64) {
	d.unmarks = append(d.unmarks, dir)
	delete(d.marks, dir)
}

func (d *delta) file(ino uint64, dirty bool) {
	if d.files == nil {
		d.files = map[uint64]bool{}
	}
	d.files[ino] = dirty
}

func (s *dirtySet) apply(d *delta) {
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
	for ino, dirty := range d.files {
		if dirty {
			s.files[ino] = true
		} else {
			delete(s.files, ino)
		}
	}
}

// dirMarks returns a copy of the marked directories.
func (s *dirtySet) dirMarks() map[uint64]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[uint64]uint64, len(s.dirs))
	for k, v := range s.dirs {
		out[k] = v
	}
	return out
}

// markSeq returns the sequence of dir's mark, or false.
func (s *dirtySet) markSeq(dir uint64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, ok := s.dirs[dir]
	return seq, ok
}

// fileList returns the files with dirty blocks.
func (s *dirtySet) fileList() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, 0, len(s.files))
	for ino := range s.files {
		out = append(out, ino)
	}
	return out
}

func (s *dirtySet) counts() (dirs, files int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dirs), len(s.files)
}

func (s *dirtySet) any() bool {
	d, f := s.counts()
	return d+f > 0
}

// load reads the marks and the dirty-file index from the database and
// returns the highest mark sequence.
func (s *dirtySet) load(db *kv) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirs, s.files = map[uint64]uint64{}, map[uint64]bool{}
	var maxSeq uint64
	err := db.View(func(txn *ktxn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pTreeMark}, PrefetchValues: true})
		for it.Rewind(); it.Valid(); it.Next() {
			dir := u64(it.Item().Key()[1:])
			_ = it.Item().Value(func(b []byte) error {
				s.dirs[dir] = u64(b)
				maxSeq = max(maxSeq, u64(b))
				return nil
			})
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pDirtyF}, PrefetchValues: false})
		for it.Rewind(); it.Valid(); it.Next() {
			s.files[u64(it.Item().Key()[1:])] = true
		}
		it.Close()
		return nil
	})
	return maxSeq, err
}

func (s *dirtySet) reset() {
	s.mu.Lock()
	s.dirs, s.files = map[uint64]uint64{}, map[uint64]bool{}
	s.mu.Unlock()
}

// update runs fn in a read-write transaction and, once it commits, applies
// the dirty-set changes fn recorded. markMu orders it against the
// checkpoint's clearing of marks.
func (v *Volume) update(fn func(txn *ktxn, d *delta) error) error {
	v.markMu.Lock()
	defer v.markMu.Unlock()
	d := &delta{}
	if err := v.db.Update(func(txn *ktxn) error { return fn(txn, d) }); err != nil {
		return err
	}
	v.dirty.apply(d)
	return nil
}

// setMark writes a tree mark for dir in txn.
func (v *Volume) setMark(txn *ktxn, d *delta, dir uint64) error {
	seq := v.seq.Add(1)
	if err := txn.Set(key64(pTreeMark, dir), put64(seq)); err != nil {
		return err
	}
	d.mark(dir, seq)
	return nil
}

// setFileDirty records in txn whether file ino has dirty blocks.
func setFileDirty(txn *ktxn, d *delta, ino uint64, dirty bool) error {
	var err error
	if dirty {
		err = txn.Set(key64(pDirtyF, ino), nil)
	} else {
		err = txn.Delete(key64(pDirtyF, ino))
	}
	if err == nil {
		d.file(ino, dirty)
	}
	return err
}

// clearMark deletes dir's mark in txn.
func clearMark(txn *ktxn, d *delta, dir uint64) error {
	if err := txn.Delete(key64(pTreeMark, dir)); err != nil {
		return err
	}
	d.unmark(dir)
	return nil
}
