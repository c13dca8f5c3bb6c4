package testservices

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MinIOPath returns the MinIO server binary the tests use: $AGENTFS_MINIO if
// set, else minio in $AGENTFS_TOOLS, else in the default tools folder
// (${XDG_CACHE_HOME:-~/.cache}/agentfs/tools, where scripts/setup-minio.sh
// builds it), else minio on PATH. The error says how to get one.
func MinIOPath() (string, error) {
	if p := os.Getenv("AGENTFS_MINIO"); p != "" {
		if err := isExecutable(p); err != nil {
			return "", fmt.Errorf("AGENTFS_MINIO=%s: %w", p, err)
		}
		return p, nil
	}
	var dirs []string
	if d := os.Getenv("AGENTFS_TOOLS"); d != "" {
		dirs = append(dirs, d)
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if cache != "" {
		dirs = append(dirs, filepath.Join(cache, "agentfs", "tools"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "minio")
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no minio binary in $AGENTFS_MINIO, %v or PATH: run scripts/setup-minio.sh", dirs)
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// minioServer is one running MinIO process.
type minioServer struct {
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been waited for
	dir      string        // data directory, removed by stop
	addr     string        // host:port of the S3 API
	user     string
	password string
	client   *s3.Client
	log      *syncBuffer
}

// MinIOKMSKeyID is the name of the KMS key the test MinIO server holds: an
// s3:// URL of StartMinIO with sse=aws:kms&sse_kms_key_id=MinIOKMSKeyID
// writes objects encrypted with it (sse=AES256 uses it too).
const MinIOKMSKeyID = "agentfs-test-key"

// kmsKey returns 32 random bytes: the key material of MinIOKMSKeyID.
func kmsKey() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

var minio = &shared[*minioServer]{start: startMinIO, stop: (*minioServer).stop}

// StartMinIO returns the URL of a new, empty bucket on a MinIO server
// running on a loopback port, for t to use until it ends:
//
//	s3://KEY:SECRET@BUCKET?endpoint=http%3A%2F%2F127.0.0.1%3APORT&path_style=true&region=us-east-1
//
// The credentials travel in the URL's userinfo (blobstore's s3 driver uses
// them instead of the AWS credential chain and never shows them), so no
// process-global environment is touched and parallel tests are safe.
//
// The server (binary found by MinIOPath, data in a temporary directory) is
// shared by the tests of the binary that use it concurrently and stopped
// when the last of them ends. If MinIO cannot be started, StartMinIO reports
// it through testenv.Missing and does not return.
func StartMinIO(t testing.TB) string {
	t.Helper()
	srv, err := minio.acquire(t)
	if err != nil {
		testenv.Missing(t, "MinIO server", err)
	}
	bucket := bucketName()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s on MinIO at %s: %v\nMinIO output:\n%s", bucket, srv.addr, err, srv.log.String())
	}
	q := url.Values{}
	q.Set("endpoint", "http://"+srv.addr)
	q.Set("region", "us-east-1")
	q.Set("path_style", "true")
	u := url.URL{Scheme: "s3", User: url.UserPassword(srv.user, srv.password), Host: bucket, RawQuery: q.Encode()}
	return u.String()
}

func startMinIO() (*minioServer, error) {
	bin, err := MinIOPath()
	if err != nil {
		return nil, err
	}
	var errs []error
	// A free port found by listening can be taken by someone else before
	// MinIO binds it: try a few times.
	for range 3 {
		srv, err := tryStartMinIO(bin)
		if err == nil {
			return srv, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func tryStartMinIO(bin string) (*minioServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "agentfs-minio-")
	if err != nil {
		return nil, err
	}
	srv := &minioServer{
		dir:      dir,
		addr:     fmt.Sprintf("127.0.0.1:%d", port),
		user:     "agentfs" + randHex(4),
		password: randHex(16),
		log:      &syncBuffer{},
		exited:   make(chan struct{}),
	}
	cmd := exec.Command(bin, "server", "--quiet", "--address", srv.addr, filepath.Join(dir, "data"))
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+srv.user,
		"MINIO_ROOT_PASSWORD="+srv.password,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CONFIG_ENV_FILE=",
		// A built-in KMS key, so that server-side encryption (SSE-S3 and
		// SSE-KMS with MinIOKMSKeyID) can be tested. Objects written
		// without an encryption header stay unencrypted.
		"MINIO_KMS_SECRET_KEY="+MinIOKMSKeyID+":"+base64.StdEncoding.EncodeToString(kmsKey()),
	)
	cmd.Stdout = srv.log
	cmd.Stderr = srv.log
	// The server must never outlive the test binary, even if it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	srv.cmd = cmd
	go func() { _ = cmd.Wait(); close(srv.exited) }()

	if err := srv.waitReady(30 * time.Second); err != nil {
		srv.stop()
		return nil, fmt.Errorf("MinIO (%s) on %s: %w\noutput:\n%s", bin, srv.addr, err, srv.log.String())
	}
	srv.client = s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + srv.addr),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(srv.user, srv.password, ""),
	})
	return srv, nil
}

func (srv *minioServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-srv.exited:
			return fmt.Errorf("exited before it was ready: %v", srv.cmd.ProcessState)
		default:
		}
		resp, err := hc.Get("http://" + srv.addr + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v (last: %w)", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop terminates MinIO (SIGTERM, then SIGKILL after 10s) and removes its
// data.
func (srv *minioServer) stop() {
	if srv.cmd != nil && srv.cmd.Process != nil {
		_ = srv.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-srv.exited:
		case <-time.After(10 * time.Second):
			_ = srv.cmd.Process.Kill()
			<-srv.exited
		}
	}
	_ = os.RemoveAll(srv.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// syncBuffer collects a child's output; it is written by exec's copying
// goroutines and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer // guarded by mu
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		return len(p), nil // enough to diagnose; drop the rest
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// RecreateMinIOBucket deletes the bucket of storeURL (a URL StartMinIO returned
// to t), with every object in it, and creates it again, empty: what a
// store whose bucket is deleted and recreated looks like to its users.
func RecreateMinIOBucket(t testing.TB, storeURL string) {
	t.Helper()
	u, err := url.Parse(storeURL)
	if err != nil {
		t.Fatal(err)
	}
	minio.mu.Lock()
	srv := minio.svc
	minio.mu.Unlock()
	if srv == nil {
		t.Fatalf("RecreateMinIOBucket(%s): no MinIO server is running (call StartMinIO first)", u.Host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket := aws.String(u.Host)
	// A writer still open on the bucket may put an object between the
	// emptying and the delete (as it would for a person deleting a bucket
	// under a live mount): empty it again and retry, a bounded number of times.
	for attempt := 1; ; attempt++ {
		emptyMinIOBucket(ctx, t, srv.client, u.Host)
		_, err := srv.client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: bucket})
		if err == nil {
			break
		}
		if attempt == 10 {
			t.Fatalf("delete bucket %s (%d attempts): %v", u.Host, attempt, err)
		}
	}
	if _, err := srv.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		t.Fatalf("create bucket %s again: %v", u.Host, err)
	}
}

// emptyMinIOBucket deletes every object of bucket.
func emptyMinIOBucket(ctx context.Context, t testing.TB, client *s3.Client, bucket string) {
	t.Helper()
	for {
		out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatalf("list bucket %s: %v", bucket, err)
		}
		for _, o := range out.Contents {
			if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				t.Fatalf("delete %s/%s: %v", bucket, aws.ToString(o.Key), err)
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return
		}
	}
}
