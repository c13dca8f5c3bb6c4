package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"cloud.google.com/go/auth/credentials"
	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

func init() { register("gs", openGCS) }

// gcsChunkSize is the chunk of a resumable upload; objects up to this size
// (when their size is known) go in one request.
const gcsChunkSize = 16 << 20

// gcsDriver talks to Google Cloud Storage (or its emulator) through
// cloud.google.com/go/storage. The client's own retries are disabled: Store
// retries.
type gcsDriver struct {
	c      *storage.Client
	bucket *storage.BucketHandle
	name   string
	// kmsKey is the Cloud KMS key (customer-managed encryption key) every
	// object is written with; "" = the bucket's default encryption.
	kmsKey string
}

var _ Driver = (*gcsDriver)(nil)

func openGCS(ctx context.Context, u *url.URL, _ bool) (Driver, string, error) {
	show := storeURL(u)
	if u.Host == "" {
		return nil, "", fmt.Errorf("gs URL needs a bucket: write gs://bucket/prefix")
	}
	if u.User != nil {
		return nil, "", fmt.Errorf("gs URLs take no credentials: use Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`)")
	}
	kmsKey, err := gcsKMSKey(u.Query())
	if err != nil {
		return nil, "", err
	}
	var copts []option.ClientOption
	if os.Getenv("STORAGE_EMULATOR_HOST") == "" {
		creds, err := credentials.DetectDefault(&credentials.DetectOptions{
			Scopes: []string{storage.ScopeFullControl},
		})
		if err != nil {
			return nil, "", fmt.Errorf("no Google Cloud credentials found: set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or run `gcloud auth application-default login`, or set STORAGE_EMULATOR_HOST for an emulator: %w", err)
		}
		copts = append(copts, option.WithAuthCredentials(creds))
	}
	c, err := storage.NewClient(ctx, copts...)
	if err != nil {
		return nil, "", fmt.Errorf("create the Google Cloud Storage client: %w", err)
	}
	c.SetRetry(storage.WithPolicy(storage.RetryNever))
	d := &gcsDriver{c: c, bucket: c.Bucket(u.Host), name: u.Host, kmsKey: kmsKey}
	if _, err := d.bucket.Attrs(ctx); err != nil {
		_ = c.Close()
		return nil, "", d.openError(ctx, show, err)
	}
	return d, trimSlashes(u.Path), nil
}

// gcsKMSKey reads the one option a gs:// URL takes: kms_key, the resource
// name of a Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K)
// that encrypts every object written (customer-managed encryption keys).
// Without it the bucket's default encryption applies.
func gcsKMSKey(q url.Values) (string, error) {
	for k := range q {
		if k != "kms_key" {
			return "", fmt.Errorf("unknown gs URL option %q: the only option is kms_key=projects/P/locations/L/keyRings/R/cryptoKeys/K (set STORAGE_EMULATOR_HOST to use an emulator)", k)
		}
	}
	key := q.Get("kms_key")
	if q.Has("kms_key") && (!strings.HasPrefix(key, "projects/") || !strings.Contains(key, "/cryptoKeys/")) {
		return "", fmt.Errorf("gs URL option kms_key=%q is not a Cloud KMS key name: write kms_key=projects/P/locations/L/keyRings/R/cryptoKeys/K", key)
	}
	return key, nil
}

// openError turns a failed bucket check into an error that says what to do.
func (d *gcsDriver) openError(ctx context.Context, show string, err error) error {
	kind := d.Classify(err)
	if ctx.Err() != nil {
		kind = KindCanceled
	}
	var msg string
	switch {
	case kind == KindCanceled:
		msg = "cancelled while checking the bucket"
	case errors.Is(err, storage.ErrBucketNotExist) || gcsCode(err) == http.StatusNotFound:
		msg = fmt.Sprintf("bucket %q does not exist: create the bucket (e.g. `gcloud storage buckets create gs://%s`) or fix the URL", d.name, d.name)
		kind = KindPermanent
	case gcsCode(err) == http.StatusForbidden || gcsCode(err) == http.StatusUnauthorized:
		msg = fmt.Sprintf("access to bucket %q denied: check the credentials (GOOGLE_APPLICATION_CREDENTIALS) and their roles on the bucket", d.name)
		kind = KindPermanent
	case kind == KindTransient:
		msg = "cannot reach Google Cloud Storage: check the network (or STORAGE_EMULATOR_HOST), then retry"
	default:
		msg = "cannot check the bucket"
	}
	return &Error{Op: "open", URL: show, Kind: kind, Err: fmt.Errorf("%s: %w", msg, err)}
}

func (d *gcsDriver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		if _, err := d.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	r, err := d.bucket.Object(key).NewRangeReader(ctx, offset, length)
	if err != nil {
		if gcsCode(err) == http.StatusRequestedRangeNotSatisfiable {
			// The object exists; the range starts at or after its end.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, err
	}
	return r, nil
}

func (d *gcsDriver) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) error {
	o := d.bucket.Object(key)
	if opts.IfAbsent {
		o = o.If(storage.Conditions{DoesNotExist: true})
	}
	// Cancelling the writer's context before Close abandons the upload, so
	// a failed copy never creates an object.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := o.NewWriter(wctx)
	w.ContentType = "application/octet-stream"
	w.KMSKeyName = d.kmsKey
	if size >= 0 && size <= gcsChunkSize {
		w.ChunkSize = 0 // one request, no buffering
	} else {
		w.ChunkSize = gcsChunkSize
	}
	if _, err := io.Copy(w, r); err != nil {
		cancel()
		_ = w.Close()
		return err
	}
	return w.Close()
}

func (d *gcsDriver) Stat(ctx context.Context, key string) (Attrs, error) {
	a, err := d.bucket.Object(key).Attrs(ctx)
	if err != nil {
		return Attrs{}, err
	}
	return Attrs{Size: a.Size, ModTime: a.Updated, Version: strconv.FormatInt(a.Generation, 10)}, nil
}

func (d *gcsDriver) List(ctx context.Context, prefix, token string, pageSize int) (ListPage, error) {
	q := &storage.Query{Prefix: prefix, Projection: storage.ProjectionNoACL}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return ListPage{}, err
	}
	var objs []*storage.ObjectAttrs
	next, err := iterator.NewPager(d.bucket.Objects(ctx, q), pageSize, token).NextPage(&objs)
	if err != nil {
		return ListPage{}, err
	}
	p := ListPage{Next: next}
	for _, o := range objs {
		p.Objects = append(p.Objects, ObjectInfo{Key: o.Name, Size: o.Size, ModTime: o.Updated})
	}
	return p, nil
}

func (d *gcsDriver) Delete(ctx context.Context, key string) error {
	return d.bucket.Object(key).Delete(ctx)
}

func (d *gcsDriver) Close() error { return d.c.Close() }

func (d *gcsDriver) Classify(err error) Kind { return classifyGCS(err) }

// classifyGCS maps a cloud.google.com/go/storage error to a Kind.
func classifyGCS(err error) Kind {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return KindCanceled
	case errors.Is(err, storage.ErrObjectNotExist):
		return KindNotFound
	case errors.Is(err, storage.ErrBucketNotExist):
		return KindPermanent
	}
	switch code := gcsCode(err); {
	case code == http.StatusNotFound:
		return KindNotFound
	case code == http.StatusPreconditionFailed:
		return KindExists
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return KindTransient
	case code >= 400:
		return KindPermanent
	}
	if k := classifyNet(err); k != KindUnknown {
		return k
	}
	if storage.ShouldRetry(err) {
		return KindTransient
	}
	return KindUnknown
}

func gcsCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}
