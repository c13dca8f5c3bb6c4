package blobstore

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

func TestEncryptionOptionErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ url, want string }{
		{"s3://b?sse=DES", `sse="DES" must be AES256`},
		{"s3://b?sse_kms_key_id=k", "sse_kms_key_id needs sse=aws:kms"},
		{"s3://b?sse=AES256&sse_kms_key_id=k", "sse_kms_key_id needs sse=aws:kms"},
		{"s3://b?sse=aws:kms&sse_kms_key_id=", "sse_kms_key_id is empty"},
		{"s3://b?kms_key=x", `unknown s3 URL option "kms_key"`},
		{"gs://b?sse=AES256", `unknown gs URL option "sse"`},
		{"gs://b?kms_key=mykey", "not a Cloud KMS key name"},
	} {
		_, _, err := OpenDriver(ctx, tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("OpenDriver(%s) = %v, want an error containing %q", tc.url, err, tc.want)
		}
	}
}

// TestS3ServerSideEncryption writes small and multipart objects through
// URLs with and without the sse options and asks MinIO how each is stored.
func TestS3ServerSideEncryption(t *testing.T) {
	ctx := context.Background()
	base := testservices.StartMinIO(t)
	for _, tc := range []struct {
		name, query string
		want        types.ServerSideEncryption
		wantKey     string
	}{
		{"none", "", "", ""},
		{"sse-s3", "&sse=AES256", types.ServerSideEncryptionAes256, ""},
		{"sse-kms", "&sse=aws:kms&sse_kms_key_id=" + testservices.MinIOKMSKeyID, types.ServerSideEncryptionAwsKms, testservices.MinIOKMSKeyID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drv, _, err := OpenDriver(ctx, base+tc.query)
			if err != nil {
				t.Fatal(err)
			}
			d := drv.(*s3Driver)
			s := New("s3://test", d, Options{})
			t.Cleanup(func() { _ = s.Close() })
			small, big := tc.name+"/small", tc.name+"/big"
			if err := s.Put(ctx, small, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("y"), s3PartSize+1) // two parts
			if err := s.PutReader(ctx, big, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{small, big} {
				out, err := d.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(d.bucket), Key: aws.String(key)})
				if err != nil {
					t.Fatal(err)
				}
				if out.ServerSideEncryption != tc.want {
					t.Errorf("%s: stored with encryption %q, want %q", key, out.ServerSideEncryption, tc.want)
				}
				if got := aws.ToString(out.SSEKMSKeyId); tc.wantKey != "" && !strings.HasSuffix(got, tc.wantKey) {
					t.Errorf("%s: KMS key %q, want %q", key, got, tc.wantKey)
				}
			}
			got, err := s.Get(ctx, small)
			if err != nil || string(got) != "hello" {
				t.Errorf("read back %q, %v", got, err)
			}
		})
	}
}

// TestGCSKMSKey checks that every upload through a gs:// URL with kms_key
// names that key. The emulator ignores KMS keys, so a proxy in front of it
// records what the client asks for.
func TestGCSKMSKey(t *testing.T) {
	ctx := context.Background()
	bucket := testservices.StartGCSEmulator(t)
	target := &url.URL{Scheme: "http", Host: os.Getenv(testservices.EmulatorHostEnv)}
	var mu sync.Mutex
	var uploads []string // kmsKeyName of each upload request
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/upload/") {
			mu.Lock()
			uploads = append(uploads, r.URL.Query().Get("kmsKeyName"))
			mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	// Restored by t.Setenv's cleanup before the emulator's release checks it.
	t.Setenv(testservices.EmulatorHostEnv, strings.TrimPrefix(proxy.URL, "http://"))

	const key = "projects/p/locations/global/keyRings/r/cryptoKeys/k"
	for _, tc := range []struct{ query, want string }{{"", ""}, {"?kms_key=" + key, key}} {
		drv, _, err := OpenDriver(ctx, bucket+tc.query)
		if err != nil {
			t.Fatal(err)
		}
		s := New(bucket, drv, Options{})
		mu.Lock()
		uploads = nil
		mu.Unlock()
		if err := s.Put(ctx, "obj", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		mu.Lock()
		if len(uploads) != 1 || uploads[0] != tc.want {
			t.Errorf("URL %s%s: uploads asked for KMS keys %q, want [%q]", bucket, tc.query, uploads, tc.want)
		}
		mu.Unlock()
	}
}
