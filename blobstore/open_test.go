package blobstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/testservices"
)

// openFailure is what openErr found.
type openFailure struct {
	URL string // Error.URL
	Msg string // Error()
}

// closeLater closes s when t ends and reports a failure to close.
func closeLater(t *testing.T, s io.Closer) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// openErr opens rawURL, expects an *blobstore.Error of kind want whose
// message contains every hint, and returns its URL and message.
func openErr(t *testing.T, rawURL string, want blobstore.Kind, hints ...string) openFailure {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := blobstore.Open(ctx, rawURL, blobstore.Options{})
	if err == nil {
		closeLater(t, s)
		t.Fatalf("Open(%s) succeeded, want an error", rawURL)
	}
	var e *blobstore.Error
	if !errors.As(err, &e) {
		t.Fatalf("Open(%s) = %T %v, want a *blobstore.Error", rawURL, err, err)
	}
	if e.Op != "open" || e.Kind != want {
		t.Errorf("Open(%s): op %q kind %v, want open and %v (%v)", rawURL, e.Op, e.Kind, want, err)
	}
	for _, h := range hints {
		if !strings.Contains(err.Error(), h) {
			t.Errorf("Open(%s) = %q, want it to mention %q", rawURL, err, h)
		}
	}
	return openFailure{URL: e.URL, Msg: e.Error()}
}

func TestOpenBadURLs(t *testing.T) {
	perm := blobstore.KindPermanent
	openErr(t, "s3://KEY:SUPERSECRET@bucket/%zz", perm, "not a valid URL", "s3://bucket/%zz")
	openErr(t, "/tmp/store", perm, "no scheme", "file://")
	openErr(t, "ftp://host/x", perm, `unknown scheme "ftp"`, "file://, gs://, mem://, s3://")
	openErr(t, "file://tmp/store", perm, "no host", "file:///abs/path")
	openErr(t, "file:relative/store", perm, "absolute path")
	openErr(t, "file://", perm, "absolute path")
	openErr(t, "s3:///prefix", perm, "needs a bucket")
	openErr(t, "s3://bucket?pathstyle=true", perm, `unknown s3 URL option "pathstyle"`)
	openErr(t, "s3://bucket?endpoint=127.0.0.1:9000", perm, "http:// or https://")
	openErr(t, "s3://bucket?endpoint=http://127.0.0.1:9000&path_style=maybe", perm, "true or false")
	openErr(t, "s3://KEYONLY@bucket?endpoint=http://127.0.0.1:9000", perm, "KEY:SECRET@bucket")
	openErr(t, "gs:///prefix", perm, "needs a bucket")
	openErr(t, "gs://bucket?endpoint=x", perm, `unknown gs URL option "endpoint"`)
	openErr(t, "gs://user:pw@bucket", perm, "no credentials")
}

func TestOpenNeverShowsCredentials(t *testing.T) {
	for _, raw := range []string{
		"s3://AKIAEXAMPLE:SUPERSECRET@bucket/%zz",
		"s3://AKIAEXAMPLE:SUPERSECRET@bucket?bogus=1",
		"s3://AKIAEXAMPLE:SUPERSECRET@bucket?endpoint=http://127.0.0.1:1&region=us-east-1",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := blobstore.Open(ctx, raw, blobstore.Options{})
		cancel()
		if err == nil {
			t.Fatalf("Open(%s) succeeded", raw)
		}
		if strings.Contains(err.Error(), "SUPERSECRET") {
			t.Errorf("error shows the secret: %v", err)
		}
	}
	if got := blobstore.DisplayURL("s3://K:SUPERSECRET@b/p?endpoint=http://x"); got != "s3://b/p" {
		t.Errorf("DisplayURL = %q", got)
	}
}

// isolateAWS points the AWS credential chain at nothing: no environment
// credentials, no config files, no instance metadata (so no network).
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":                      "",
		"AWS_SECRET_ACCESS_KEY":                  "",
		"AWS_SESSION_TOKEN":                      "",
		"AWS_PROFILE":                            "",
		"AWS_DEFAULT_PROFILE":                    "",
		"AWS_REGION":                             "",
		"AWS_DEFAULT_REGION":                     "",
		"AWS_SHARED_CREDENTIALS_FILE":            dir + "/credentials",
		"AWS_CONFIG_FILE":                        dir + "/config",
		"AWS_EC2_METADATA_DISABLED":              "true",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE":            "",
		"AWS_ROLE_ARN":                           "",
	} {
		t.Setenv(k, v)
	}
}

func TestOpenS3MissingCredentials(t *testing.T) {
	isolateAWS(t)
	// The endpoint is a closed port: credentials are checked before any
	// request is sent.
	e := openErr(t, "s3://bucket/p?endpoint=http://127.0.0.1:1&region=us-east-1", blobstore.KindPermanent,
		"s3://bucket/p", "no AWS credentials", "AWS_ACCESS_KEY_ID", "AWS_PROFILE")
	if e.URL != "s3://bucket/p" {
		t.Errorf("error URL = %q", e.URL)
	}
}

func TestOpenS3MissingRegion(t *testing.T) {
	isolateAWS(t)
	openErr(t, "s3://KEY:SECRET@bucket", blobstore.KindPermanent, "region=", "AWS_REGION")
}

func TestOpenS3Unreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil { // nothing listens there now
		t.Fatal(err)
	}
	openErr(t, fmt.Sprintf("s3://KEY:SECRET@bucket?endpoint=http://%s&region=us-east-1", addr), blobstore.KindTransient, "cannot reach", "s3://bucket")
}

func TestOpenS3OnMinIO(t *testing.T) {
	raw := testservices.StartMinIO(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}

	missing := *u
	missing.Host = "no-such-bucket-" + u.Host[len(u.Host)-8:]
	openErr(t, missing.String(), blobstore.KindPermanent, "does not exist", "create the bucket", "s3://"+missing.Host)

	wrong := *u
	wrong.User = url.UserPassword(u.User.Username(), "wrong-secret")
	e := openErr(t, wrong.String(), blobstore.KindPermanent, "denied", "AWS_ACCESS_KEY_ID")
	if strings.Contains(e.Msg, "wrong-secret") {
		t.Errorf("error shows the secret: %v", e.Msg)
	}

	ctx := context.Background()
	s, err := blobstore.Open(ctx, raw, blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, s)
	if strings.Contains(s.URL(), u.User.String()) || strings.Contains(s.URL(), "endpoint") {
		t.Errorf("URL() = %q shows credentials or options", s.URL())
	}
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}

	// The URL's path is a key prefix.
	prefixed := *u
	prefixed.Path = "/tenant/ws/"
	p, err := blobstore.Open(ctx, prefixed.String(), blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, p)
	if want := "s3://" + u.Host + "/tenant/ws"; p.URL() != want {
		t.Errorf("URL() = %q, want %q", p.URL(), want)
	}
	if err := p.Put(ctx, "k", []byte("in prefix")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "tenant/ws/k"); err != nil || string(got) != "in prefix" {
		t.Errorf("object put under the URL prefix: %q, %v", got, err)
	}
	if _, err := p.Get(ctx, "tenant/ws/k"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("prefix applied twice? %v", err)
	}
}

func TestOpenGCSMissingCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/missing-key.json")
	openErr(t, "gs://bucket/p", blobstore.KindPermanent, "gs://bucket/p", "no Google Cloud credentials", "GOOGLE_APPLICATION_CREDENTIALS", "gcloud auth application-default login")
}

func TestOpenGCSMissingBucket(t *testing.T) {
	testservices.StartGCSEmulator(t)
	openErr(t, "gs://no-such-bucket-agentfs/p", blobstore.KindPermanent, "does not exist", "create the bucket", "gs://no-such-bucket-agentfs/p")
}

func TestOpenMemShared(t *testing.T) {
	ctx := context.Background()
	a, err := blobstore.Open(ctx, "mem://open-test-shared", blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, a)
	b, err := blobstore.Open(ctx, "mem://open-test-shared/sub", blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, b)
	if err := b.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Get(ctx, "sub/k"); err != nil || string(got) != "v" {
		t.Fatalf("named mem stores do not share: %q %v", got, err)
	}
	c, err := blobstore.Open(ctx, "mem://", blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, c)
	if _, err := c.Get(ctx, "sub/k"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("mem:// is not private: %v", err)
	}
}

func TestOpenDriver(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	drv, prefix, err := blobstore.OpenDriver(ctx, "file://"+dir)
	if err != nil || prefix != "" {
		t.Fatalf("OpenDriver(file) = %v, %q, %v", drv, prefix, err)
	}
	s := blobstore.New("file://"+dir, drv, blobstore.Options{})
	closeLater(t, s)
	if err := s.Put(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	_, prefix, err = blobstore.OpenDriver(ctx, "mem://od/some/prefix/")
	if err != nil || prefix != "some/prefix" {
		t.Fatalf("OpenDriver(mem with path) prefix %q, %v", prefix, err)
	}
	if _, _, err := blobstore.OpenDriver(ctx, "nope://x"); blobstore.KindOf(err) != blobstore.KindPermanent {
		t.Errorf("OpenDriver(bad scheme) = %v", err)
	}
}
