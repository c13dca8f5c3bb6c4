package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

// Forks and branch management.

// Errors of branch management; check them with errors.Is.
var (
	// ErrBranchExists: a fork's new branch already has commits.
	ErrBranchExists = errors.New("branch already exists")
	// ErrDefaultBranch: removing the default branch needs force.
	ErrDefaultBranch = errors.New("refusing to remove the default branch")
)

// ForkOptions modify Fork.
type ForkOptions struct {
	Message string
	Host    string // default os.Hostname()
	Now     func() time.Time
}

// Fork creates branch newBranch whose first commit (kind "fork") has the
// tree of src — any reference Resolve accepts: a snapshot, a branch head or
// branch@seq — and, as parent, the source commit (which may later be
// pruned: readers tolerate a missing parent). It costs a few small
// requests whatever the tree's size; the data is shared, not copied.
//
// It fails with ErrBadName for an invalid name, ErrBranchExists if
// newBranch has commits (two racing forks to one name: exactly one wins),
// ErrNoRef if src names nothing, and ErrSourceGone if the source was
// removed or pruned while forking (the new branch is then removed again).
func (r *Repo) Fork(ctx context.Context, src, newBranch string, opts ForkOptions) (Commit, error) {
	if err := ValidateName("branch", newBranch); err != nil {
		return Commit{}, err
	}
	s, err := r.Resolve(ctx, src)
	if err != nil {
		return Commit{}, fmt.Errorf("fork %s: %w", src, err)
	}
	return r.fork(ctx, s, src, newBranch, opts)
}

// fork writes the first commit of newBranch from the resolved source s
// (publish, then verify); src is the reference as given, for messages.
func (r *Repo) fork(ctx context.Context, s Source, src, newBranch string, opts ForkOptions) (Commit, error) {
	if err := r.branchFree(ctx, newBranch); err != nil {
		return Commit{}, fmt.Errorf("fork %s to %s: %w", src, newBranch, err)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	msg := opts.Message
	if msg == "" {
		msg = "fork of " + s.String()
	}
	parent := s.Commit
	c := Commit{
		ID:     CommitID{Branch: newBranch, Seq: 1},
		Parent: &parent,
		Root:   s.Tree.Root, Links: s.Tree.Links,
		Time: now().UTC(), Kind: "fork", Message: msg, Host: hostOr(opts.Host),
	}
	if err := r.WriteCommit(ctx, c); err != nil {
		if errors.Is(err, ErrCommitExists) {
			return Commit{}, fmt.Errorf("fork %s to %s: %w", src, newBranch, ErrBranchExists)
		}
		return Commit{}, fmt.Errorf("fork %s to %s: %w", src, newBranch, err)
	}
	if err := r.verifySource(ctx, s); err != nil {
		_ = r.store.Delete(ctx, CommitKey(c.ID))
		_ = r.store.Delete(ctx, HeadKey(newBranch))
		return Commit{}, fmt.Errorf("fork %s to %s: %w", src, newBranch, err)
	}
	return c, nil
}

// branchFree returns nil if branch has no commits, ErrBranchExists if it
// has. Every branch with commits has a head ref (written before its first
// commit), so one HEAD answers the common case; a ref without commits (an
// interrupted fork) is confirmed by a listing.
func (r *Repo) branchFree(ctx context.Context, branch string) error {
	_, err := r.store.Stat(ctx, HeadKey(branch))
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := r.HeadSeq(ctx, branch); err == nil {
		return fmt.Errorf("%w (pick another name, or remove it with `agentfs branch rm`)", ErrBranchExists)
	} else if !errors.Is(err, ErrNoCommits) {
		return err
	}
	return nil
}

// BranchInfo describes a branch for `agentfs branch list`.
type BranchInfo struct {
	Name string `json:"name"`
	// Head is the newest commit; zero (Head.ID.Seq 0) when the branch has a
	// ref but no commit (a fork or removal in progress).
	Head Commit `json:"head"`
	// Lease is the branch's current writer lease, nil when none was taken
	// or the last was released. Lease.Live says whether a writer holds it.
	Lease *LeaseInfo `json:"lease,omitempty"`
}

// Branches lists every branch (those with a head ref and those with
// commits), sorted by name, with its head commit and its lease as of now.
func (r *Repo) Branches(ctx context.Context, now time.Time) ([]BranchInfo, error) {
	names, err := r.ListBranches(ctx)
	if err != nil {
		return nil, err
	}
	objs, err := r.listCommitObjects(ctx)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	for n := range objs {
		if !set[n] {
			names = append(names, n)
			set[n] = true
		}
	}
	slices.Sort(names)
	out := make([]BranchInfo, 0, len(names))
	for _, n := range names {
		bi := BranchInfo{Name: n}
		if cs := objs[n]; len(cs) > 0 {
			c, err := r.ReadCommit(ctx, CommitID{n, cs[len(cs)-1].seq})
			if err != nil && !errors.Is(err, ErrMissing) {
				return nil, err
			}
			if err == nil {
				bi.Head = c
			}
		}
		li, err := r.CurrentLease(ctx, n, now)
		if err != nil {
			return nil, err
		}
		bi.Lease = li
		out = append(out, bi)
	}
	return out, nil
}

// DeleteBranchOptions modify DeleteBranch.
type DeleteBranchOptions struct {
	// Force removes the default branch, and a branch a live writer holds
	// (that writer's next commit would bring the branch back with only
	// that commit: stop it first).
	Force bool
	Now   func() time.Time
}

// DeleteBranch removes branch name: its commits (oldest first, so an
// interrupted removal leaves a branch whose head is intact), then its head
// ref and its lease records. Its data is freed by the next gc (snapshots
// taken of it keep theirs). It refuses the default branch (ErrDefaultBranch)
// and a branch with a live writer lease (*LeaseHeldError) unless forced; a
// branch that does not exist gives ErrNoCommits. It returns the number of
// commits removed.
func (r *Repo) DeleteBranch(ctx context.Context, name string, opts DeleteBranchOptions) (int, error) {
	if err := ValidateName("branch", name); err != nil {
		return 0, err
	}
	if name == DefaultBranch && !opts.Force {
		return 0, fmt.Errorf("branch %s: %w (force it to remove it anyway)", name, ErrDefaultBranch)
	}
	if err := r.CheckVolume(ctx); err != nil {
		return 0, fmt.Errorf("remove branch %s: %w", name, err)
	}
	now := time.Now()
	if opts.Now != nil {
		now = opts.Now()
	}
	li, err := r.CurrentLease(ctx, name, now)
	if err != nil {
		return 0, err
	}
	if li != nil && li.Live && !opts.Force {
		return 0, &LeaseHeldError{Branch: name, Holder: li.Holder, Expires: li.Expires}
	}
	seqs, err := r.ListCommits(ctx, name)
	if err != nil {
		return 0, err
	}
	_, refErr := r.store.Stat(ctx, HeadKey(name))
	if len(seqs) == 0 && errors.Is(refErr, blobstore.ErrNotFound) {
		return 0, fmt.Errorf("branch %q: %w", name, ErrNoCommits)
	}
	for i, seq := range seqs {
		if err := r.store.Delete(ctx, CommitKey(CommitID{name, seq})); err != nil {
			return i, fmt.Errorf("remove branch %s: commit %d: %w", name, seq, err)
		}
	}
	if err := r.store.Delete(ctx, HeadKey(name)); err != nil {
		return len(seqs), fmt.Errorf("remove branch %s: head ref: %w", name, err)
	}
	leases, err := r.listAll(ctx, "leases/"+name+"/")
	for _, o := range leases {
		if err == nil {
			err = r.store.Delete(ctx, o.Key)
		}
	}
	if err != nil {
		return len(seqs), fmt.Errorf("remove branch %s: leases: %w", name, err)
	}
	return len(seqs), nil
}
