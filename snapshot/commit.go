package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

// CommitID names a commit: its branch and its number on that branch (from 1).
type CommitID struct {
	Branch string `json:"branch"`
	Seq    uint64 `json:"seq"`
}

func (c CommitID) String() string { return fmt.Sprintf("%s@%d", c.Branch, c.Seq) }

// RootDir holds the attributes of a tree's root directory (a tree lists only
// children, so the root's own attributes travel with the commit).
type RootDir struct {
	Mode     uint32  `json:"mode"`
	Uid      uint32  `json:"uid"`
	Gid      uint32  `json:"gid"`
	Atime    int64   `json:"atime"`
	Mtime    int64   `json:"mtime"`
	Ctime    int64   `json:"ctime"`
	Nlink    uint32  `json:"nlink"`
	Xattrs   []Xattr `json:"xattrs,omitempty"`
	Tree     BlobRef `json:"tree"`
	SubFiles uint64  `json:"files"`
	SubBytes uint64  `json:"bytes"`
	// Virtual workspaces over a host directory (see Entry): the root reads
	// through to the host directory itself; a zero Tree means nothing in it
	// was changed.
	HasOrigin bool `json:"has_origin,omitempty"`
	Modified  bool `json:"modified,omitempty"`
}

// VirtualBase is what a virtual workspace's changes are relative to:
// a commit (of a branch or a snapshot), or a directory on a host.
type VirtualBase struct {
	Commit   *CommitID `json:"commit,omitempty"`
	Snapshot string    `json:"snapshot,omitempty"` // the snapshot Commit came from, if any
	HostDir  string    `json:"host_dir,omitempty"` // absolute path of a host directory base
	Host     string    `json:"host,omitempty"`     // the machine that has HostDir
	// Since is, for a host directory, when the workspace was created or
	// last committed to it: host entries changed after it are the host's
	// own changes, which a commit does not overwrite unless forced.
	Since time.Time `json:"since,omitzero"`
}

// Commit records one state of a branch. Commits are immutable and created
// with a conditional write: exactly one writer wins each number.
type Commit struct {
	ID     CommitID  `json:"id"`
	Parent *CommitID `json:"parent,omitempty"`
	Root   RootDir   `json:"root"`
	// Links is the link table: a tree-encoded blob whose entries, named
	// LinkName(id), are the multiply-linked files of this commit. Absent
	// when the volume has no hard links.
	Links *BlobRef `json:"links,omitempty"`
	// Virtual is set on every commit of a virtual workspace branch.
	Virtual *VirtualBase `json:"virtual,omitempty"`
	Time    time.Time    `json:"time"`
	Kind    string       `json:"kind"` // checkpoint, sync, fork, restore, commit, init, ...
	Message string       `json:"message,omitempty"`
	Host    string       `json:"host,omitempty"`
	Writer  string       `json:"writer,omitempty"` // the writer's lease holder ID
}

// CommitKey returns the store key of a commit.
func CommitKey(id CommitID) string {
	return "commits/" + id.Branch + "/" + fmt.Sprintf("%016x", id.Seq)
}

// HeadKey returns the store key of a branch's head hint.
func HeadKey(branch string) string { return "refs/heads/" + branch }

// EncodeCommit returns the JSON form of c.
func EncodeCommit(c Commit) []byte {
	b, _ := json.MarshalIndent(c, "", "  ")
	return append(b, '\n')
}

// DecodeCommit parses a commit and validates it.
func DecodeCommit(b []byte) (Commit, error) {
	var c Commit
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("commit: %w: %w", ErrCorrupt, err)
	}
	if err := ValidateName("branch", c.ID.Branch); err != nil || c.ID.Seq == 0 {
		return c, fmt.Errorf("commit: bad id %v: %w", c.ID, ErrCorrupt)
	}
	if c.Parent != nil && (ValidateName("branch", c.Parent.Branch) != nil || c.Parent.Seq == 0) {
		return c, fmt.Errorf("commit %v: bad parent %v: %w", c.ID, *c.Parent, ErrCorrupt)
	}
	if c.Root.Tree.IsZero() && !c.Root.HasOrigin {
		return c, fmt.Errorf("commit %v: no root tree: %w", c.ID, ErrCorrupt)
	}
	if v := c.Virtual; v != nil && (v.Commit == nil) == (v.HostDir == "") {
		return c, fmt.Errorf("commit %v: a virtual base needs exactly one of a commit and a host directory: %w", c.ID, ErrCorrupt)
	}
	return c, nil
}

// WriteCommit creates c (c.ID names branch and number). Every object the
// commit references must already be stored. If the number is taken it
// returns an error matching ErrCommitExists and writes nothing; if the store
// no longer holds r's volume (see CheckVolume), an error matching
// ErrVolumeChanged and writes nothing. On success it also updates the
// branch's head hint (best effort: the hint is verified on every read).
func (r *Repo) WriteCommit(ctx context.Context, c Commit) error {
	if err := ValidateName("branch", c.ID.Branch); err != nil {
		return err
	}
	if c.ID.Seq == 0 {
		return fmt.Errorf("commit number 0: %w", ErrBadName)
	}
	if err := r.CheckVolume(ctx); err != nil {
		return fmt.Errorf("write commit %v: %w", c.ID, err)
	}
	if c.ID.Seq == 1 {
		// A new branch: its ref exists before its first commit, so
		// ListBranches never misses a branch that has commits.
		b, _ := json.Marshal(headHint{Seq: 1})
		if err := r.putObject(ctx, HeadKey(c.ID.Branch), b); err != nil {
			return fmt.Errorf("create branch %s: %w", c.ID.Branch, err)
		}
	}
	err := r.putObjectIfAbsent(ctx, CommitKey(c.ID), EncodeCommit(c))
	if errors.Is(err, blobstore.ErrExists) {
		return fmt.Errorf("commit %v: %w", c.ID, ErrCommitExists)
	}
	if err != nil {
		return fmt.Errorf("write commit %v: %w", c.ID, err)
	}
	if c.ID.Seq > 1 {
		r.writeHint(ctx, c.ID)
	}
	return nil
}

type headHint struct {
	Seq uint64 `json:"seq"`
}

func (r *Repo) writeHint(ctx context.Context, id CommitID) {
	b, _ := json.Marshal(headHint{Seq: id.Seq})
	// A failed hint only costs the next reader a listing.
	_ = r.putObject(ctx, HeadKey(id.Branch), b)
}

// ReadCommit reads one commit. A missing commit gives ErrMissing.
func (r *Repo) ReadCommit(ctx context.Context, id CommitID) (Commit, error) {
	b, err := r.getObject(ctx, CommitKey(id))
	if err != nil {
		return Commit{}, fmt.Errorf("read commit %v: %w", id, r.missing(CommitKey(id), err))
	}
	c, err := DecodeCommit(b)
	if err != nil {
		return c, fmt.Errorf("read commit %v: %w", id, err)
	}
	if c.ID != id {
		return c, fmt.Errorf("read commit %v: object names %v: %w", id, c.ID, ErrCorrupt)
	}
	return c, nil
}

// HeadSeq returns the number of the newest commit of branch, or an error
// matching ErrNoCommits. It reads the head hint and verifies it by probing
// the following numbers; without a usable hint it lists the branch.
func (r *Repo) HeadSeq(ctx context.Context, branch string) (uint64, error) {
	if err := ValidateName("branch", branch); err != nil {
		return 0, err
	}
	var seq uint64
	b, err := r.getObject(ctx, HeadKey(branch))
	switch {
	case err == nil:
		var h headHint
		if json.Unmarshal(b, &h) == nil && h.Seq > 0 {
			seq = h.Seq
		}
	case !errors.Is(err, blobstore.ErrNotFound) && !errors.Is(err, ErrCorrupt): // a bad hint is no hint
		return 0, fmt.Errorf("read head of %s: %w", branch, err)
	}
	if seq > 0 {
		if _, err := r.store.Stat(ctx, CommitKey(CommitID{branch, seq})); err != nil {
			if !errors.Is(err, blobstore.ErrNotFound) {
				return 0, fmt.Errorf("read head of %s: %w", branch, err)
			}
			seq = 0 // stale hint: list instead
		}
	}
	if seq > 0 {
		for probes := 0; probes < 16; probes++ {
			_, err := r.store.Stat(ctx, CommitKey(CommitID{branch, seq + 1}))
			if errors.Is(err, blobstore.ErrNotFound) {
				return seq, nil
			}
			if err != nil {
				return 0, fmt.Errorf("read head of %s: %w", branch, err)
			}
			seq++
		}
	}
	// Far behind or no hint: the newest key of the listing wins.
	var last uint64
	err = r.store.Walk(ctx, "commits/"+branch+"/", func(o blobstore.ObjectInfo) error {
		name := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		if n, err := strconv.ParseUint(name, 16, 64); err == nil && n > last {
			last = n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("list commits of %s: %w", branch, err)
	}
	if last == 0 {
		return 0, fmt.Errorf("branch %q: %w", branch, ErrNoCommits)
	}
	return last, nil
}

// Head returns the newest commit of branch (ErrNoCommits if none).
func (r *Repo) Head(ctx context.Context, branch string) (Commit, error) {
	seq, err := r.HeadSeq(ctx, branch)
	if err != nil {
		return Commit{}, err
	}
	return r.ReadCommit(ctx, CommitID{branch, seq})
}

// ListCommits returns the numbers of the commits stored for branch, in
// increasing order.
func (r *Repo) ListCommits(ctx context.Context, branch string) ([]uint64, error) {
	var out []uint64
	err := r.store.Walk(ctx, "commits/"+branch+"/", func(o blobstore.ObjectInfo) error {
		name := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		if n, err := strconv.ParseUint(name, 16, 64); err == nil {
			out = append(out, n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list commits of %s: %w", branch, err)
	}
	return out, nil
}

// ListBranches returns the names of the branches that have a head hint, in
// lexicographic order.
func (r *Repo) ListBranches(ctx context.Context) ([]string, error) {
	var out []string
	err := r.store.Walk(ctx, "refs/heads/", func(o blobstore.ObjectInfo) error {
		out = append(out, strings.TrimPrefix(o.Key, "refs/heads/"))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list branches: %w", err)
	}
	return out, nil
}

// EmptyTree is the encoding of a directory with no entries.
var EmptyTree = []byte(treeMagic + "\x00")

// CreateBranchEmpty creates branch with a first commit whose root is an
// empty directory with the given owner and mode (`agentfs init`). It fails
// with ErrCommitExists if the branch already has a commit.
func (r *Repo) CreateBranchEmpty(ctx context.Context, branch string, mode, uid, gid uint32, now time.Time, host, message string) (Commit, error) {
	w := r.NewPackWriter()
	ref := w.Add(r.EncodeBlob(BlobTree, EmptyTree))
	if err := r.PutPack(ctx, w); err != nil {
		return Commit{}, err
	}
	ns := now.UnixNano()
	c := Commit{
		ID:      CommitID{Branch: branch, Seq: 1},
		Root:    RootDir{Mode: mode & 0o7777, Uid: uid, Gid: gid, Atime: ns, Mtime: ns, Ctime: ns, Nlink: 2, Tree: ref},
		Time:    now.UTC(),
		Kind:    "init",
		Message: message,
		Host:    host,
	}
	if err := r.WriteCommit(ctx, c); err != nil {
		return Commit{}, err
	}
	return c, nil
}
