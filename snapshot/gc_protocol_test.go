package snapshot

// Deterministic interleavings of gc with snapshot, fork and restore, using
// gc's phase hooks: the "publish, then verify" rule and gc's recheck must
// together keep every object that a published ref reaches.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

var protoSeq atomic.Int64

// protoRepo returns a volume whose main branch has commits 1 (empty), 2
// (f = "two", in a pack of its own) and 3 (f = "three").
func protoRepo(t *testing.T) *Repo {
	t.Helper()
	ctx := context.Background()
	s, err := blobstore.Open(ctx, fmt.Sprintf("mem://gc-protocol-%d-%d", os.Getpid(), protoSeq.Add(1)), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Init(ctx, s, NewConfig(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if _, err := r.CreateBranchEmpty(ctx, "main", 0o755, 0, 0, time.Now(), "h", "init"); err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{"two", "three"} {
		w := r.NewPackWriter()
		chunk := w.Add(r.EncodeBlob(BlobData, []byte(data)))
		tree, err := EncodeTree([]Entry{{Name: "f", Type: TypeFile, Mode: 0o644, Nlink: 1, Size: uint64(len(data)), Chunks: []Chunk{{Ref: chunk}}}})
		if err != nil {
			t.Fatal(err)
		}
		root := w.Add(r.EncodeBlob(BlobTree, tree))
		if err := r.PutPack(ctx, w); err != nil {
			t.Fatal(err)
		}
		seq, err := r.HeadSeq(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		c := Commit{ID: CommitID{"main", seq + 1}, Parent: &CommitID{"main", seq}, Root: RootDir{Mode: 0o755, Nlink: 2, Tree: root, SubFiles: 1, SubBytes: uint64(len(data))}, Time: time.Now(), Kind: "test"}
		if err := r.WriteCommit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func readF(t *testing.T, r *Repo, tr TreeRoot) (string, error) {
	t.Helper()
	ctx := context.Background()
	e, err := r.LookupPath(ctx, tr, "f")
	if err != nil {
		return "", err
	}
	b, err := r.ReadEntry(ctx, e, -1)
	return string(b), err
}

func pruneOpts(h *gcHooks) GCOptions {
	return GCOptions{Policy: Retention{KeepLast: 1}, Grace: time.Minute,
		Now: func() time.Time { return time.Now().Add(2 * time.Minute) }, hooks: h}
}

func fsckOK(t *testing.T, r *Repo) {
	t.Helper()
	rep, err := r.Fsck(context.Background(), FsckOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Errorf("fsck: %s: %s %v", p.Object, p.Message, p.Affected)
	}
}

// Without any interference, gc prunes main@2 and sweeps its pack: the
// other tests below would lose "two" if the protocol were broken.
func TestGCProtocolControl(t *testing.T) {
	r := protoRepo(t)
	c2, err := r.ReadCommit(context.Background(), CommitID{"main", 2})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.GC(context.Background(), pruneOpts(nil))
	if err != nil {
		t.Fatal(err)
	}
	if rep.CommitsPruned != 2 || rep.PacksSwept != 2 {
		t.Fatalf("control gc: %+v", rep)
	}
	if _, err := readF(t, r, CommitTree(c2)); !errors.Is(err, ErrMissing) {
		t.Fatalf("main@2's data after gc: %v", err)
	}
}

// A fork and a snapshot of a commit gc is pruning, made after gc's mark:
// the source still exists when they verify it, so gc's recheck marks them.
func TestGCRecheckMarksRefsMadeDuringMark(t *testing.T) {
	r := protoRepo(t)
	ctx := context.Background()
	var forkErr, saveErr error
	h := &gcHooks{afterMark: func() {
		_, forkErr = r.Fork(ctx, "main@2", "rescue", ForkOptions{})
		_, saveErr = r.SaveSnapshot(ctx, "keep-two", CommitID{"main", 2}, SaveOptions{})
	}}
	rep, err := r.GC(ctx, pruneOpts(h))
	if err != nil || forkErr != nil || saveErr != nil {
		t.Fatalf("gc %v, fork %v, save %v", err, forkErr, saveErr)
	}
	if rep.NewCommits != 1 || rep.NewSnapshots != 1 || rep.PacksSwept != 1 {
		t.Fatalf("gc: %+v", rep)
	}
	head, err := r.Head(ctx, "rescue")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readF(t, r, CommitTree(head)); err != nil || got != "two" {
		t.Fatalf("rescue reads %q, %v", got, err)
	}
	s, err := r.GetSnapshot(ctx, "keep-two")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readF(t, r, s.Tree()); err != nil || got != "two" {
		t.Fatalf("snapshot reads %q, %v", got, err)
	}
	fsckOK(t, r)
}

// A fork, snapshot and restore whose source was resolved before gc pruned
// it and written after gc's recheck: the verification finds the source
// gone and each undoes itself.
func TestPublishAfterRecheckFailsCleanly(t *testing.T) {
	r := protoRepo(t)
	ctx := context.Background()
	src, err := r.Resolve(ctx, "main@2")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := r.ReadCommit(ctx, CommitID{"main", 2})
	if err != nil {
		t.Fatal(err)
	}
	var forkErr, saveErr error
	h := &gcHooks{afterRecheck: func() {
		_, forkErr = r.fork(ctx, src, "main@2", "late", ForkOptions{})
		_, saveErr = r.saveCommit(ctx, "late-snap", c2, SaveOptions{})
	}}
	if _, err := r.GC(ctx, pruneOpts(h)); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(forkErr, ErrSourceGone) || !errors.Is(saveErr, ErrSourceGone) {
		t.Fatalf("fork: %v; save: %v", forkErr, saveErr)
	}
	if _, err := r.HeadSeq(ctx, "late"); !errors.Is(err, ErrNoCommits) {
		t.Fatalf("the failed fork left branch late: %v", err)
	}
	if _, err := r.GetSnapshot(ctx, "late-snap"); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("the failed save left its snapshot: %v", err)
	}
	fsckOK(t, r)
}

// A restore from a snapshot removed (and gc'd) while it ran puts the
// branch back to its previous tree.
func TestRestoreOfVanishedSourceIsUndone(t *testing.T) {
	r := protoRepo(t)
	ctx := context.Background()
	if _, err := r.SaveSnapshot(ctx, "two", CommitID{"main", 2}, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := r.Resolve(ctx, "two")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteSnapshot(ctx, "two"); err != nil {
		t.Fatal(err)
	}
	// restoreSource is Restore after its Resolve.
	res, err := r.restoreSource(ctx, src, "main", RestoreOptions{})
	if !errors.Is(err, ErrSourceGone) {
		t.Fatalf("restore: %v", err)
	}
	head, err := r.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if head.ID.Seq != 5 || head.Kind != "restore" {
		t.Fatalf("head after the undone restore: %+v", head)
	}
	if got, err := readF(t, r, CommitTree(head)); err != nil || got != "three" {
		t.Fatalf("main reads %q, %v after the undone restore", got, err)
	}
	if res.Saved == nil {
		t.Fatal("no automatic snapshot")
	}
	fsckOK(t, r)
}
