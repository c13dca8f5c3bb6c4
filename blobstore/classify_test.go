package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"

	"cloud.google.com/go/storage"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"google.golang.org/api/googleapi"
)

// s3Err builds the error shape aws-sdk-go-v2 returns for a failed S3 call:
// an OperationError around a ResponseError (HTTP status) around the API
// error (S3 error code); code may be empty (HEAD responses have no body).
func s3Err(status int, code string) error {
	inner := errors.New("no body")
	if code != "" {
		inner = &smithy.GenericAPIError{Code: code, Message: "msg"}
	}
	return &smithy.OperationError{ServiceID: "S3", OperationName: "Op", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      inner,
		},
	}}
}

func TestClassifyS3(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"NoSuchKey", s3Err(404, "NoSuchKey"), KindNotFound},
		{"typed NoSuchKey", fmt.Errorf("get: %w", &types.NoSuchKey{}), KindNotFound},
		{"HEAD 404 without body", s3Err(404, ""), KindNotFound},
		{"typed NotFound", &types.NotFound{}, KindNotFound},
		{"PreconditionFailed", s3Err(412, "PreconditionFailed"), KindExists},
		{"412 without code", s3Err(412, ""), KindExists},
		{"ConditionalRequestConflict", s3Err(409, "ConditionalRequestConflict"), KindTransient},
		{"SlowDown", s3Err(503, "SlowDown"), KindTransient},
		{"InternalError", s3Err(500, "InternalError"), KindTransient},
		{"ServiceUnavailable", s3Err(503, "ServiceUnavailable"), KindTransient},
		{"RequestTimeout", s3Err(400, "RequestTimeout"), KindTransient},
		{"429", s3Err(429, ""), KindTransient},
		{"502 no code", s3Err(502, ""), KindTransient},
		{"XMinioStorageFull", s3Err(507, "XMinioStorageFull"), KindNoSpace},
		{"507 without code", s3Err(507, ""), KindNoSpace},
		{"AccessDenied", s3Err(403, "AccessDenied"), KindPermanent},
		{"NoSuchBucket", s3Err(404, "NoSuchBucket"), KindPermanent},
		{"InvalidAccessKeyId", s3Err(403, "InvalidAccessKeyId"), KindPermanent},
		{"SignatureDoesNotMatch", s3Err(403, "SignatureDoesNotMatch"), KindPermanent},
		{"ExpiredToken", s3Err(400, "ExpiredToken"), KindPermanent},
		{"403 no code", s3Err(403, ""), KindPermanent},
		{"other 409", s3Err(409, "BucketNotEmpty"), KindPermanent},
		{"connection refused", &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, KindTransient},
		{"reset mid-body", fmt.Errorf("read body: %w", syscall.ECONNRESET), KindTransient},
		{"truncated body", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), KindTransient},
		{"net timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, KindTransient},
		{"canceled", &smithy.OperationError{Err: context.Canceled}, KindCanceled},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), KindCanceled},
		{"unrecognised", errors.New("something else"), KindUnknown},
	} {
		if got := classifyS3(tc.err); got != tc.want {
			t.Errorf("%s: classifyS3(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestClassifyGCS(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"object not exist", fmt.Errorf("attrs: %w", storage.ErrObjectNotExist), KindNotFound},
		{"404", &googleapi.Error{Code: 404}, KindNotFound},
		{"bucket not exist", storage.ErrBucketNotExist, KindPermanent},
		{"precondition", &googleapi.Error{Code: 412, Message: "conditionNotMet"}, KindExists},
		{"429", &googleapi.Error{Code: 429}, KindTransient},
		{"503", &googleapi.Error{Code: 503}, KindTransient},
		{"500", &googleapi.Error{Code: 500}, KindTransient},
		{"408", &googleapi.Error{Code: 408}, KindTransient},
		{"403", &googleapi.Error{Code: 403}, KindPermanent},
		{"401", &googleapi.Error{Code: 401}, KindPermanent},
		{"400", &googleapi.Error{Code: 400}, KindPermanent},
		{"connection refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, KindTransient},
		{"truncated body", io.ErrUnexpectedEOF, KindTransient},
		{"canceled", fmt.Errorf("w: %w", context.Canceled), KindCanceled},
		{"unrecognised", errors.New("something else"), KindUnknown},
	} {
		if got := classifyGCS(tc.err); got != tc.want {
			t.Errorf("%s: classifyGCS(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestClassifyGocloud(t *testing.T) {
	d := &gocloudDriver{}
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"below a file", &os.PathError{Op: "stat", Path: "/s/a/b", Err: syscall.ENOTDIR}, KindNotFound},
		{"EAGAIN", fmt.Errorf("w: %w", syscall.EAGAIN), KindTransient},
		{"disk full", &os.PathError{Op: "write", Path: "/s/packs/x", Err: syscall.ENOSPC}, KindNoSpace},
		{"disk full, wrapped", fmt.Errorf("blob (code=Unknown): %w", &os.PathError{Op: "write", Path: "/s/x", Err: syscall.ENOSPC}), KindNoSpace},
		{"quota", &os.PathError{Op: "write", Path: "/s/packs/x", Err: syscall.EDQUOT}, KindNoSpace},
		{"read-only filesystem", &os.PathError{Op: "open", Path: "/s/packs/x", Err: syscall.EROFS}, KindPermanent},
		{"plain", errors.New("x"), KindUnknown},
	} {
		if got := d.Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPartSize(t *testing.T) {
	if got := partSizeFor(1, -1); got != s3PartSize {
		t.Errorf("first part of a stream = %d", got)
	}
	// A stream of 10,000 parts must reach S3's 5 TiB object limit.
	var total int64
	for n := 1; n <= s3MaxParts; n++ {
		ps := partSizeFor(n, -1)
		if ps < 5<<20 || ps > 5<<30 {
			t.Fatalf("part %d of a stream: %d bytes, outside S3's 5 MiB..5 GiB", n, ps)
		}
		total += ps
	}
	if total < 5<<40 {
		t.Errorf("10,000 stream parts hold %d bytes, less than 5 TiB", total)
	}
	// Known sizes fit in 10,000 parts.
	for _, size := range []int64{1, 100 << 20, 1 << 40, 5 << 40} {
		ps := partSizeFor(2, size)
		if (size+ps-1)/ps > s3MaxParts || ps < s3PartSize {
			t.Errorf("size %d: part size %d", size, ps)
		}
	}
}
