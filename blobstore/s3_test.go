package blobstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// failingReader yields n zero bytes, then fails with errBroken.
type failingReader struct{ n int64 }

var errBroken = errors.New("source broke")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errBroken
	}
	p = p[:min(int64(len(p)), r.n)]
	clear(p)
	r.n -= int64(len(p))
	return len(p), nil
}

// pendingUploads lists the multipart uploads not completed or aborted.
func pendingUploads(t *testing.T, d *s3Driver) int {
	t.Helper()
	out, err := d.c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(d.bucket)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

func TestS3FailedMultipartUploadIsAborted(t *testing.T) {
	ctx := context.Background()
	drv, _, err := OpenDriver(ctx, testservices.StartMinIO(t))
	if err != nil {
		t.Fatal(err)
	}
	d := drv.(*s3Driver)
	s := New("s3://test", d, Options{})
	t.Cleanup(func() { _ = s.Close() })

	// The source fails after three parts' worth of bytes.
	err = s.PutReader(ctx, "broken", &failingReader{n: 3*s3PartSize + 100}, -1)
	if !errors.Is(err, errBroken) {
		t.Fatalf("PutReader from a failing source = %v, want its error", err)
	}
	if n := pendingUploads(t, d); n != 0 {
		t.Errorf("%d multipart uploads left after a failed put, want 0 (aborted)", n)
	}
	if _, err := s.Stat(ctx, "broken"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a failed multipart put left an object: %v", err)
	}

	// Cancelled mid-upload: aborted too, although ctx is done.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	err = s.PutReader(cctx, "cancelled", io.LimitReader(zeros{}, 1<<40), -1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled PutReader = %v", err)
	}
	if n := pendingUploads(t, d); n != 0 {
		t.Errorf("%d multipart uploads left after a cancelled put, want 0 (aborted)", n)
	}

	// A multipart PutIfAbsent over an existing key is refused at completion
	// and its parts are not left behind.
	big := bytes.Repeat([]byte("x"), 2*s3PartSize+1)
	if err := s.PutIfAbsent(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "big", big[1:]); !errors.Is(err, ErrExists) {
		t.Fatalf("multipart PutIfAbsent over an existing key = %v, want ErrExists", err)
	}
	if n := pendingUploads(t, d); n != 0 {
		t.Errorf("%d multipart uploads left after a refused conditional put", n)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
