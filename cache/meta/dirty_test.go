package meta

import "testing"

// TestDirtySetMirrorsTheDatabase shows that the dirty set, changed by the
// deltas of committed transactions, mirrors the marks and the dirty-file
// index (CheckInvariants holds), survives Load, and that CheckInvariants
// sees a set that forgot a change.
func TestDirtySetMirrorsTheDatabase(t *testing.T) {
	k := openKV(t, 0)
	var s DirtySet
	update := func(fn func(txn *Txn, d *Delta) error) {
		t.Helper()
		d := &Delta{}
		if err := k.Update(func(txn *Txn) error { return fn(txn, d) }); err != nil {
			t.Fatal(err)
		}
		s.Apply(d)
		if err := s.CheckInvariants(k); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(txn *Txn, d *Delta, dir, seq uint64) error {
		if err := txn.Set(Key64(PrefixTreeMark, dir), Put64(seq)); err != nil {
			return err
		}
		d.Mark(dir, seq)
		return nil
	}
	update(func(txn *Txn, d *Delta) error {
		if err := mark(txn, d, 1, 1); err != nil {
			return err
		}
		if err := mark(txn, d, 7, 2); err != nil {
			return err
		}
		return SetFileDirty(txn, d, 9, true)
	})
	update(func(txn *Txn, d *Delta) error {
		if err := ClearMark(txn, d, 7); err != nil {
			return err
		}
		if err := SetFileDirty(txn, d, 9, false); err != nil {
			return err
		}
		return SetFileDirty(txn, d, 10, true)
	})
	if dirs, files := s.Counts(); dirs != 1 || files != 1 {
		t.Fatalf("counts %d dirs %d files, want 1 and 1", dirs, files)
	}

	var loaded DirtySet
	if seq, err := loaded.Load(k); err != nil || seq != 1 {
		t.Fatalf("load: highest sequence %d, %v; want 1", seq, err)
	}
	if err := loaded.CheckInvariants(k); err != nil {
		t.Fatal(err)
	}

	// A transaction whose delta is lost: the set no longer mirrors it.
	if err := k.Update(func(txn *Txn) error { return SetFileDirty(txn, &Delta{}, 11, true) }); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(k); err == nil {
		t.Error("a set missing a dirty file passed")
	}
	s.Apply(&Delta{Files: map[uint64]bool{11: true}, marks: map[uint64]uint64{5: 3}})
	if err := s.CheckInvariants(k); err == nil {
		t.Error("a set holding a mark the database lacks passed")
	}
}
