package blobstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// opener builds a driver for a parsed URL. It returns the driver and the key
// prefix (without leading or trailing '/') that the URL's path selects.
// create is Options.Create.
type opener func(ctx context.Context, u *url.URL, create bool) (drv Driver, prefix string, err error)

// openers is filled by the driver files of this package, keyed by scheme.
var openers = map[string]opener{}

func register(scheme string, o opener) { openers[scheme] = o }

// Schemes returns the URL schemes Open accepts, sorted.
func Schemes() []string {
	var s []string
	for k := range openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Open returns a Store for a URL:
//
//	file:///abs/path            a directory on the local disk (see Options.Create)
//	mem://[name][/prefix]       a process-local in-memory store (for tests);
//	                            stores opened with the same name share objects
//	s3://[KEY:SECRET@]bucket[/prefix][?endpoint=URL&region=R&path_style=true&profile=P&sse=S&sse_kms_key_id=K]
//	gs://bucket[/prefix][?kms_key=projects/P/locations/L/keyRings/R/cryptoKeys/K]
//
// The path of the URL becomes a key prefix: the Store sees only the keys
// under it. s3:// uses the standard AWS credential chain (environment,
// shared config and credentials files or profile=P, web identity, container
// and instance roles) unless the URL carries static credentials as
// KEY:SECRET userinfo (for MinIO and tests; they never appear in URL() or
// in errors). gs:// uses Application Default Credentials, or the emulator
// without authentication when STORAGE_EMULATOR_HOST is set. Open checks
// that the bucket exists and that credentials were found.
//
// Server-side encryption: on s3://, sse=AES256 (SSE-S3) or sse=aws:kms
// (SSE-KMS, with sse_kms_key_id=K for a key id, alias or ARN of your own;
// the account's aws/s3 key otherwise) is asked of S3 for every object
// written; on gs://, kms_key names the Cloud KMS key (a customer-managed
// encryption key) every object is written with. Without them the bucket's
// default encryption applies. Reads need nothing: the store decrypts.
//
// A malformed URL, an unknown scheme, a missing bucket or missing
// credentials is a KindPermanent *Error that names the URL (without
// credentials) and says what to do; so is a file:// directory that does not
// exist, unless opts.Create is set. No other call ever creates a store.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	u, drv, prefix, err := openDriver(ctx, rawURL, opts.Create)
	if err != nil {
		return nil, err
	}
	if opts.WrapDriver != nil {
		drv = opts.WrapDriver(drv)
	}
	if prefix == "" {
		return New(storeURL(u), drv, opts), nil
	}
	// The prefix comes from the URL's path: Sub puts it back into URL().
	base := *u
	base.Path = ""
	s := New(storeURL(&base), drv, opts)
	{
		sub := s.Sub(prefix)
		sub.owner = true
		return sub, nil
	}
}

// OpenDriver builds the driver for a URL, as Open does, without the Store
// around it. It returns the key prefix the URL's path selects (no leading or
// trailing '/'; "" for none), which the caller applies with Store.Sub. The
// caller owns the driver and must Close it. Errors are those of Open (with
// Options.Create unset: a missing file:// directory is an error).
//
// It is meant for composing stores in tests, e.g. a retrying Store over a
// fault-injecting driver:
//
//	drv, prefix, err := blobstore.OpenDriver(ctx, url)
//	s := blobstore.New(url, faulty.New(drv, faulty.Options{...}), opts).Sub(prefix)
//
// Options.WrapDriver does the same through Open in one call.
func OpenDriver(ctx context.Context, rawURL string) (drv Driver, prefix string, err error) {
	_, drv, prefix, err = openDriver(ctx, rawURL, false)
	return drv, prefix, err
}

// DisplayURL returns rawURL without credentials or query, as Store.URL shows
// it; a URL that does not parse is returned with any userinfo removed.
func DisplayURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return redact(rawURL)
	}
	return storeURL(u)
}

func openDriver(ctx context.Context, rawURL string, create bool) (*url.URL, Driver, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, "", &Error{Op: "open", URL: redact(rawURL), Kind: KindPermanent,
			Err: fmt.Errorf("not a valid URL: %w (expected file:///abs/path, mem://, s3://bucket/prefix or gs://bucket/prefix)", errors.Unwrap(err))}
	}
	if u.Scheme == "" {
		return nil, nil, "", &Error{Op: "open", URL: redactURL(u), Kind: KindPermanent,
			Err: fmt.Errorf("not a store URL: no scheme; use one of %s", strings.Join(Schemes(), "://, ")+"://")}
	}
	o, ok := openers[u.Scheme]
	if !ok {
		return nil, nil, "", &Error{Op: "open", URL: redactURL(u), Kind: KindPermanent,
			Err: fmt.Errorf("unknown scheme %q: use one of %s", u.Scheme, strings.Join(Schemes(), "://, ")+"://")}
	}
	drv, prefix, err := o(ctx, u, create)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, nil, "", err
		}
		kind := KindPermanent
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			kind = KindCanceled
		}
		return nil, nil, "", &Error{Op: "open", URL: storeURL(u), Kind: kind, Err: err}
	}
	return u, drv, prefix, nil
}

// storeURL is the display form of u: scheme, host and path, no query or
// credentials.
func storeURL(u *url.URL) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return strings.TrimSuffix(c.String(), "/")
}

func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

func redact(raw string) string {
	if i := strings.Index(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + raw[i+1:]
		}
	}
	return raw
}
