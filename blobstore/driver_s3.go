package blobstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"golang.org/x/sync/errgroup"
)

func init() { register("s3", openS3) }

const (
	// s3PartSize is the size of the parts of a multipart upload (and the
	// largest object sent with one PutObject). Parts grow past it for very
	// large streams so that 10,000 parts are never exceeded.
	s3PartSize = 8 << 20
	// s3PartsInFlight bounds the parts of one upload sent concurrently (and
	// so the memory one upload buffers: s3PartsInFlight+1 parts).
	s3PartsInFlight = 4
	// s3MaxParts is S3's limit on the parts of one upload.
	s3MaxParts = 10000
)

// s3Driver talks to S3 or an S3-compatible store (MinIO) through
// aws-sdk-go-v2. The SDK's own retries are disabled: Store retries.
type s3Driver struct {
	c      *s3.Client
	bucket string
	// bufs recycles part buffers of s3PartSize bytes.
	bufs sync.Pool
	// sse is the server-side encryption asked of S3 for every object
	// written ("" = the bucket's default); kmsKeyID the KMS key of
	// aws:kms ("" = the account's default aws/s3 key).
	sse      types.ServerSideEncryption
	kmsKeyID string
}

var _ Driver = (*s3Driver)(nil)

// s3Query lists the query options an s3:// URL accepts.
var s3Query = map[string]bool{"endpoint": true, "region": true, "path_style": true, "profile": true, "sse": true, "sse_kms_key_id": true}

func openS3(ctx context.Context, u *url.URL, _ bool) (Driver, string, error) {
	show := storeURL(u)
	bucket := u.Host
	if bucket == "" {
		return nil, "", fmt.Errorf("s3 URL needs a bucket: write s3://bucket/prefix")
	}
	q := u.Query()
	for k := range q {
		if !s3Query[k] {
			return nil, "", fmt.Errorf("unknown s3 URL option %q: the options are endpoint, region, path_style, profile, sse and sse_kms_key_id", k)
		}
	}
	sse, kmsKeyID, err := s3Encryption(q)
	if err != nil {
		return nil, "", err
	}
	var lopts []func(*config.LoadOptions) error
	lopts = append(lopts, config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }))
	if r := q.Get("region"); r != "" {
		lopts = append(lopts, config.WithRegion(r))
	}
	if p := q.Get("profile"); p != "" {
		lopts = append(lopts, config.WithSharedConfigProfile(p))
	}
	if u.User != nil {
		secret, ok := u.User.Password()
		if !ok || u.User.Username() == "" {
			return nil, "", fmt.Errorf("s3 URL credentials must be KEY:SECRET@bucket (or leave them out to use the AWS credential chain)")
		}
		lopts = append(lopts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(u.User.Username(), secret, "")))
	}
	endpoint := q.Get("endpoint")
	if endpoint != "" {
		eu, err := url.Parse(endpoint)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" {
			return nil, "", fmt.Errorf("s3 URL option endpoint=%q must be an http:// or https:// URL, like endpoint=http://127.0.0.1:9000", endpoint)
		}
	}
	pathStyle := false
	if v := q.Get("path_style"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, "", fmt.Errorf("s3 URL option path_style=%q must be true or false", v)
		}
		pathStyle = b
	}

	cfg, err := config.LoadDefaultConfig(ctx, lopts...)
	if err != nil {
		return nil, "", fmt.Errorf("load AWS configuration (check AWS_PROFILE, AWS_CONFIG_FILE and the profile= option): %w", err)
	}
	if cfg.Region == "" {
		if endpoint == "" {
			return nil, "", fmt.Errorf("no AWS region: add region=REGION to the URL or set AWS_REGION")
		}
		// S3-compatible stores mostly ignore the region; SigV4 needs one.
		cfg.Region = "us-east-1"
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "", fmt.Errorf("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (or profile=P in the URL), or give KEY:SECRET@ in the URL: %w", err)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
		// Objects uploaded in parts carry a checksum of checksums, which
		// the SDK cannot check on GET; it would log that on every read.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	d := &s3Driver{c: c, bucket: bucket, sse: sse, kmsKeyID: kmsKeyID}
	d.bufs.New = func() any { b := make([]byte, s3PartSize); return &b }

	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return nil, "", d.openError(ctx, show, err)
	}
	return d, trimSlashes(u.Path), nil
}

// s3Encryption reads the server-side encryption options of an s3:// URL:
// sse=AES256 (SSE-S3: keys managed by S3) or sse=aws:kms (SSE-KMS), the
// latter with an optional sse_kms_key_id=KEY (a key id, alias or ARN; the
// account's aws/s3 key when absent). Neither option: the bucket's default
// encryption applies.
func s3Encryption(q url.Values) (types.ServerSideEncryption, string, error) {
	sse, key := q.Get("sse"), q.Get("sse_kms_key_id")
	switch {
	case q.Has("sse") && sse != string(types.ServerSideEncryptionAes256) && sse != string(types.ServerSideEncryptionAwsKms):
		return "", "", fmt.Errorf("s3 URL option sse=%q must be AES256 (keys managed by S3) or aws:kms (with sse_kms_key_id=KEY for a key of your own)", sse)
	case q.Has("sse_kms_key_id") && key == "":
		return "", "", fmt.Errorf("s3 URL option sse_kms_key_id is empty: give a KMS key id, alias or ARN, or leave the option out to use the account's aws/s3 key")
	case key != "" && sse != string(types.ServerSideEncryptionAwsKms):
		return "", "", fmt.Errorf("s3 URL option sse_kms_key_id needs sse=aws:kms (got sse=%q)", sse)
	}
	return types.ServerSideEncryption(sse), key, nil
}

// encryption returns the server-side encryption fields of a PutObject or
// CreateMultipartUpload (zero: the bucket's default).
func (d *s3Driver) encryption() (types.ServerSideEncryption, *string) {
	if d.kmsKeyID == "" {
		return d.sse, nil
	}
	return d.sse, aws.String(d.kmsKeyID)
}

// openError turns a failed HeadBucket into an error that says what to do.
func (d *s3Driver) openError(ctx context.Context, show string, err error) error {
	kind := d.Classify(err)
	if ctx.Err() != nil {
		kind = KindCanceled
	}
	status := httpStatus(err)
	var msg string
	switch {
	case kind == KindCanceled:
		msg = "cancelled while checking the bucket"
	case status == http.StatusNotFound || apiCode(err) == "NoSuchBucket":
		msg = fmt.Sprintf("bucket %q does not exist: create the bucket (e.g. `aws s3 mb s3://%s`) or fix the URL", d.bucket, d.bucket)
		kind = KindPermanent
	case status == http.StatusForbidden || status == http.StatusUnauthorized:
		msg = fmt.Sprintf("access to bucket %q denied: check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or KEY:SECRET@ in the URL) and the bucket policy", d.bucket)
		kind = KindPermanent
	case status == http.StatusMovedPermanently:
		msg = fmt.Sprintf("bucket %q is in another region: add region=REGION to the URL", d.bucket)
		kind = KindPermanent
	case kind == KindTransient:
		msg = "cannot reach the store: check the endpoint and the network, then retry"
	default:
		msg = "cannot check the bucket"
	}
	return &Error{Op: "open", URL: show, Kind: kind, Err: fmt.Errorf("%s: %w", msg, err)}
}

func (d *s3Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length == 0 {
		if _, err := d.Stat(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &s3.GetObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)}
	switch {
	case length > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	case offset > 0:
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", offset))
	}
	out, err := d.c.GetObject(ctx, in)
	if err != nil {
		if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			// The object exists and the range starts at or after its end
			// (or the object is empty): nothing to read.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, err
	}
	return out.Body, nil
}

func (d *s3Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) error {
	// Read the first part. If the object fits in it, one PutObject does.
	bp := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(bp)
	n, err := io.ReadFull(r, *bp)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return d.putObject(ctx, key, (*bp)[:n], opts)
	case err != nil:
		return err
	}
	return d.putMultipart(ctx, key, r, (*bp)[:n], size, opts)
}

func (d *s3Driver) putObject(ctx context.Context, key string, data []byte, opts PutOptions) error {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(d.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/octet-stream"),
	}
	if opts.IfAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	in.ServerSideEncryption, in.SSEKMSKeyId = d.encryption()
	_, err := d.c.PutObject(ctx, in)
	return err
}

// partSizeFor returns the size of part n (1-based) of an upload of size
// bytes (-1: unknown). Known sizes get equal parts of at least s3PartSize;
// unknown sizes double the part size every 1,000 parts, which reaches S3's
// 5 TiB object limit before the 10,000th part.
func partSizeFor(n int, size int64) int64 {
	if size > 0 {
		ps := (size + s3MaxParts - 1) / s3MaxParts
		return max(ps, s3PartSize)
	}
	return int64(s3PartSize) << min((n-1)/1000, 9)
}

// putMultipart uploads first and the rest of r as a multipart upload, up to
// s3PartsInFlight parts at a time. Any failure aborts the upload, so no parts
// are left behind (and billed).
func (d *s3Driver) putMultipart(ctx context.Context, key string, r io.Reader, first []byte, size int64, opts PutOptions) (err error) {
	cin := &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(d.bucket),
		Key:               aws.String(key),
		ContentType:       aws.String("application/octet-stream"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
	}
	cin.ServerSideEncryption, cin.SSEKMSKeyId = d.encryption()
	cr, err := d.c.CreateMultipartUpload(ctx, cin)
	if err != nil {
		return err
	}
	uploadID := cr.UploadId
	defer func() {
		if err == nil {
			return
		}
		// Abort even when ctx is cancelled, but not forever.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, aerr := d.c.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(d.bucket), Key: aws.String(key), UploadId: uploadID,
		}); aerr != nil && httpStatus(aerr) != http.StatusNotFound {
			err = fmt.Errorf("%w (and aborting multipart upload %s failed: %s)", err, aws.ToString(uploadID), aerr.Error())
		}
	}()

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s3PartsInFlight)
	var mu sync.Mutex
	var parts []types.CompletedPart // guarded by mu; index = part number - 1
	upload := func(num int32, data []byte, release func()) {
		g.Go(func() error {
			defer release()
			out, err := d.c.UploadPart(gctx, &s3.UploadPartInput{
				Bucket:            aws.String(d.bucket),
				Key:               aws.String(key),
				UploadId:          uploadID,
				PartNumber:        aws.Int32(num),
				Body:              bytes.NewReader(data),
				ContentLength:     aws.Int64(int64(len(data))),
				ChecksumAlgorithm: types.ChecksumAlgorithmCrc32,
			})
			if err != nil {
				return err
			}
			mu.Lock()
			parts[num-1] = types.CompletedPart{PartNumber: aws.Int32(num), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}
			mu.Unlock()
			return nil
		})
	}

	// The first part is borrowed from Put; copy it so Put can recycle its
	// buffer independently of the goroutine.
	num := int32(1)
	parts = append(parts, types.CompletedPart{})
	firstCopy := append([]byte(nil), first...)
	upload(num, firstCopy, func() {})
	var readErr error
	for gctx.Err() == nil {
		num++
		if num > s3MaxParts {
			readErr = fmt.Errorf("object too large: more than %d parts", s3MaxParts)
			break
		}
		ps := partSizeFor(int(num), size)
		var buf []byte
		release := func() {}
		if ps == s3PartSize {
			bp := d.bufs.Get().(*[]byte)
			buf = *bp
			release = func() { d.bufs.Put(bp) }
		} else {
			buf = make([]byte, ps)
		}
		n, err := io.ReadFull(r, buf)
		if n == 0 {
			release()
			if err != nil && !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		mu.Lock()
		parts = append(parts, types.CompletedPart{})
		mu.Unlock()
		upload(num, buf[:n], release)
		if err != nil {
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				readErr = err
			}
			break
		}
	}
	if werr := g.Wait(); werr != nil {
		return werr
	}
	if readErr != nil {
		return readErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	in := &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(d.bucket),
		Key:             aws.String(key),
		UploadId:        uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if opts.IfAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err = d.c.CompleteMultipartUpload(ctx, in)
	return err
}

func (d *s3Driver) Stat(ctx context.Context, key string) (Attrs, error) {
	out, err := d.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
	if err != nil {
		return Attrs{}, err
	}
	return Attrs{Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified), Version: aws.ToString(out.ETag)}, nil
}

func (d *s3Driver) List(ctx context.Context, prefix, token string, pageSize int) (ListPage, error) {
	in := &s3.ListObjectsV2Input{
		Bucket:  aws.String(d.bucket),
		MaxKeys: aws.Int32(int32(pageSize)),
	}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	if token != "" {
		in.ContinuationToken = aws.String(token)
	}
	out, err := d.c.ListObjectsV2(ctx, in)
	if err != nil {
		return ListPage{}, err
	}
	var p ListPage
	for _, o := range out.Contents {
		p.Objects = append(p.Objects, ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
	}
	if aws.ToBool(out.IsTruncated) {
		p.Next = aws.ToString(out.NextContinuationToken)
	}
	return p, nil
}

func (d *s3Driver) Delete(ctx context.Context, key string) error {
	_, err := d.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
	return err
}

// Close releases nothing: the SDK's HTTP connections are pooled and closed
// when idle.
func (d *s3Driver) Close() error { return nil }

// s3Transient are the S3 error codes worth retrying.
var s3Transient = map[string]bool{
	"SlowDown": true, "RequestTimeout": true, "RequestTimeoutException": true,
	"InternalError": true, "ServiceUnavailable": true, "Throttling": true,
	"ThrottlingException": true, "TooManyRequests": true, "RequestThrottled": true,
	"RequestLimitExceeded": true, "BandwidthLimitExceeded": true,
	"ConditionalRequestConflict": true, "OperationAborted": true,
	"XMinioServerNotInitialized": true,
}

// s3Permanent are the S3 error codes retrying cannot fix.
var s3Permanent = map[string]bool{
	"AccessDenied": true, "NoSuchBucket": true, "InvalidAccessKeyId": true,
	"SignatureDoesNotMatch": true, "ExpiredToken": true, "InvalidToken": true,
	"InvalidBucketName": true, "AllAccessDisabled": true, "AccountProblem": true,
	"InvalidArgument": true, "InvalidRequest": true, "EntityTooLarge": true,
	"EntityTooSmall": true, "KeyTooLongError": true, "MethodNotAllowed": true,
	"NotImplemented": true, "NoSuchUpload": true, "InvalidPart": true,
	"InvalidPartOrder": true,
}

func (d *s3Driver) Classify(err error) Kind { return classifyS3(err) }

// classifyS3 maps an aws-sdk-go-v2 error to a Kind: by S3 error code first,
// then by HTTP status, then by transport error.
func classifyS3(err error) Kind {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return KindCanceled
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return KindNotFound
	}
	switch code := apiCode(err); {
	case code == "NoSuchKey":
		return KindNotFound
	case code == "PreconditionFailed":
		return KindExists
	case code == "XMinioStorageFull":
		return KindNoSpace
	case s3Transient[code]:
		return KindTransient
	case s3Permanent[code]:
		return KindPermanent
	}
	switch st := httpStatus(err); {
	case st == http.StatusNotFound:
		return KindNotFound
	case st == http.StatusPreconditionFailed:
		return KindExists
	case st == http.StatusInsufficientStorage:
		return KindNoSpace
	case st == http.StatusRequestTimeout || st == http.StatusTooManyRequests || st >= 500:
		return KindTransient
	case st >= 400:
		return KindPermanent
	}
	return classifyNet(err)
}

// classifyNet classifies transport errors common to the HTTP providers:
// connection failures, resets, timeouts and truncated bodies are transient.
func classifyNet(err error) Kind {
	var se *smithyhttp.RequestSendError
	var ne net.Error
	switch {
	case errors.As(err, &se):
		return KindTransient
	case errors.As(err, &ne):
		return KindTransient
	case errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ETIMEDOUT):
		return KindTransient
	}
	return KindUnknown
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	var sre *smithyhttp.ResponseError
	if errors.As(err, &sre) {
		return sre.HTTPStatusCode()
	}
	return 0
}
