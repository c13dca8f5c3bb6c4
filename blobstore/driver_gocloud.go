package blobstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"
)

func init() {
	register("file", openFile)
	register("mem", openMem)
}

// gocloudDriver adapts a gocloud.dev/blob Bucket (file:// and mem://).
type gocloudDriver struct {
	b *blob.Bucket
	// dir is the root directory of a file:// store ("" for mem://). Writes
	// check that it still exists: fileblob would recreate it.
	dir string
	// lockPath, when set, is a file that conditional writes flock so that
	// PutIfAbsent is exclusive across processes sharing a directory.
	lockPath string
	// shared buckets (named mem://) are not closed by Close.
	shared bool
}

var _ Driver = (*gocloudDriver)(nil)

func openFile(_ context.Context, u *url.URL, create bool) (Driver, string, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, "", fmt.Errorf("file URLs take an absolute path with no host: write file:///abs/path (three slashes), not file://%s%s", u.Host, u.Path)
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return nil, "", fmt.Errorf("file URL needs an absolute path, like file:///var/lib/agentfs/store")
	}
	dir := filepath.Clean(u.Path)
	if create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, "", fmt.Errorf("create store directory %s: %w", dir, err)
		}
	} else if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("store directory %s does not exist: create a volume there with `agentfs init file://%s`, or fix the URL (if the store was moved, or lives on a filesystem that is not mounted, bring it back first)", dir, dir)
	}
	// Temporary files next to the objects: renames stay on one filesystem.
	b, err := fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true, Metadata: fileblob.MetadataDontWrite})
	if err != nil {
		return nil, "", fmt.Errorf("open store directory %s: %w", dir, err)
	}
	return &gocloudDriver{b: b, dir: dir, lockPath: filepath.Join(dir, fileLockName)}, "", nil
}

var (
	memMu      sync.Mutex
	memBuckets = map[string]*blob.Bucket{}
)

// openMem opens mem://NAME. Stores opened with the same non-empty NAME in one
// process share their objects; mem:// alone is a fresh, private store.
func openMem(_ context.Context, u *url.URL, _ bool) (Driver, string, error) {
	name := u.Host
	if name == "" {
		return &gocloudDriver{b: memblob.OpenBucket(nil)}, "", nil
	}
	memMu.Lock()
	defer memMu.Unlock()
	b, ok := memBuckets[name]
	if !ok {
		b = memblob.OpenBucket(nil)
		memBuckets[name] = b
	}
	return &gocloudDriver{b: b, shared: true}, trimSlashes(u.Path), nil
}

func trimSlashes(p string) string {
	for len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

func (d *gocloudDriver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	r, err := d.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// fileTempName matches the temporary files fileblob writes next to an
// object while it is being written (<key>.<hex nanoseconds>.tmp).
var fileTempName = regexp.MustCompile(`\.[0-9a-f]+\.tmp$`)

// fileLockName is the lock file conditional writes take on file:// stores.
const fileLockName = ".agentfs-put.lock"

// fileInternal reports whether a key listed in a file:// store is the
// driver's own (a write in progress, the lock), not an object.
func fileInternal(key string) bool {
	return key == fileLockName || fileTempName.MatchString(key)
}

func (d *gocloudDriver) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) error {
	if d.lockPath != "" && fileInternal(key) {
		return fmt.Errorf("key %q is reserved on file:// stores (it looks like a temporary file): %w", key, errReservedKey)
	}
	if err := d.checkRoot(); err != nil {
		return err
	}
	if opts.IfAbsent && d.lockPath != "" {
		unlock, err := flockFile(d.lockPath)
		if err != nil {
			return err
		}
		defer unlock()
	}
	// Cancelling the writer's context before Close aborts the write, so a
	// failed copy never commits a partial object.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := d.b.NewWriter(wctx, key, &blob.WriterOptions{IfNotExist: opts.IfAbsent, ContentType: "application/octet-stream"})
	if err != nil {
		return putError(key, err)
	}
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		_ = w.Close()
		return putError(key, err)
	}
	return putError(key, w.Close())
}

// checkRoot fails when a file:// store's directory no longer exists or is
// no longer a directory (moved away, deleted, its filesystem unmounted):
// fileblob would otherwise recreate it, and writes would land in an empty
// stray directory. A directory that disappears between the check and the
// write can still be recreated; writers that commit verify the volume's
// identity (snapshot.Repo.CheckVolume), so nothing is committed there.
func (d *gocloudDriver) checkRoot() error {
	if d.dir == "" {
		return nil
	}
	fi, err := os.Stat(d.dir)
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		err = syscall.ENOTDIR
	}
	return fmt.Errorf("store directory %s is gone (moved, deleted, or its filesystem unmounted?); not recreating it: %w: %w", d.dir, errStoreGone, err)
}

// putError marks a failed write whose key runs through a file ("a/b" when
// "a" is an object, or the store directory replaced by a file): mkdir fails
// with ENOTDIR, which for a read means "no such object" but for a write is
// a permanent failure, not a missing object.
func putError(key string, err error) error {
	if err != nil && errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("cannot write %q: a file is in the way of its directory: %w: %w", key, errPathBlocked, err)
	}
	return err
}

func flockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func (d *gocloudDriver) Stat(ctx context.Context, key string) (Attrs, error) {
	a, err := d.b.Attributes(ctx, key)
	if err != nil {
		return Attrs{}, err
	}
	v := a.ETag
	if v == "" {
		v = fmt.Sprintf("%d-%d", a.ModTime.UnixNano(), a.Size)
	}
	return Attrs{Size: a.Size, ModTime: a.ModTime, Version: v}, nil
}

func (d *gocloudDriver) List(ctx context.Context, prefix, token string, pageSize int) (ListPage, error) {
	tok := blob.FirstPageToken
	if token != "" {
		t, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return ListPage{}, fmt.Errorf("bad page token: %w", err)
		}
		tok = t
	}
	var objs []*blob.ListObject
	var next []byte
	var err error
	for attempt := 0; ; attempt++ {
		objs, next, err = d.b.ListPage(ctx, tok, pageSize, &blob.ListOptions{Prefix: prefix})
		// fileblob stats each listed file: one deleted meanwhile makes the
		// page fail with not-found. Listing again sees the directory anew.
		if d.lockPath == "" || gcerrors.Code(err) != gcerrors.NotFound || attempt >= 5 {
			break
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return ListPage{}, err
	}
	var p ListPage
	for _, o := range objs {
		if o.IsDir || (d.lockPath != "" && fileInternal(o.Key)) {
			continue
		}
		p.Objects = append(p.Objects, ObjectInfo{Key: o.Key, Size: o.Size, ModTime: o.ModTime})
	}
	if len(next) > 0 {
		p.Next = base64.RawURLEncoding.EncodeToString(next)
	}
	return p, nil
}

func (d *gocloudDriver) Delete(ctx context.Context, key string) error {
	return d.b.Delete(ctx, key)
}

var (
	errReservedKey = errors.New("reserved key")
	errStoreGone   = errors.New("store directory missing")
	errPathBlocked = errors.New("path blocked by a file")
)

func (d *gocloudDriver) Classify(err error) Kind {
	if errors.Is(err, errReservedKey) || errors.Is(err, errStoreGone) || errors.Is(err, errPathBlocked) {
		return KindPermanent
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return KindNoSpace // file://: the disk is full, or the quota reached
	}
	if errors.Is(err, syscall.EROFS) {
		return KindPermanent // file://: the store's filesystem is mounted read-only
	}
	if errors.Is(err, syscall.ENOTDIR) {
		// file://, reading: a key below an object ("a/b" when "a" is a
		// file) does not exist. Writes never get here (see putError).
		return KindNotFound
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return KindNotFound
	case gcerrors.FailedPrecondition, gcerrors.AlreadyExists:
		return KindExists
	case gcerrors.Canceled, gcerrors.DeadlineExceeded:
		return KindCanceled
	case gcerrors.ResourceExhausted, gcerrors.Internal:
		return KindTransient
	case gcerrors.InvalidArgument, gcerrors.PermissionDenied, gcerrors.Unimplemented:
		return KindPermanent
	}
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
		return KindTransient
	}
	return KindUnknown
}

func (d *gocloudDriver) Close() error {
	if d.shared {
		return nil
	}
	return d.b.Close()
}
