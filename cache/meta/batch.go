package meta

// Batch writes many keys through a DB, committing every BatchCommitOps
// writes. It is not atomic as a whole: use it only where every prefix of
// the writes is a consistent state. The first failed write stops it: later
// writes are skipped and Flush returns that error. A Batch is not safe for
// concurrent use.
type Batch struct {
	db  *DB
	txn *Txn
	n   int // writes in txn
	err error
}

// NewBatch returns an empty batch of writes to db.
func NewBatch(db *DB) *Batch { return &Batch{db: db, txn: db.NewTransaction(true)} }

// Op runs f, one write, in the batch's current transaction, which commits
// once it holds BatchCommitOps writes. After a failure it does nothing.
func (b *Batch) Op(f func(*Txn) error) {
	if b.err != nil {
		return
	}
	if b.err = f(b.txn); b.err != nil {
		return
	}
	if b.n++; b.n >= BatchCommitOps {
		b.err = b.txn.Commit()
		b.txn, b.n = b.db.NewTransaction(true), 0
	}
}

// Set sets key k to val.
func (b *Batch) Set(k, val []byte) { b.Op(func(t *Txn) error { return t.Set(k, val) }) }

// Delete deletes key k.
func (b *Batch) Delete(k []byte) { b.Op(func(t *Txn) error { return t.Delete(k) }) }

// Flush commits the writes not committed yet, or, after a failure,
// discards them and returns the failure.
func (b *Batch) Flush() error {
	if b.err != nil {
		b.txn.Discard()
		return b.err
	}
	return b.txn.Commit()
}

// Discard drops the writes not committed yet (those committed stay).
func (b *Batch) Discard() { b.txn.Discard() }
