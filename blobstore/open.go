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
type opener func(ctx context.Context, u *url.URL) (drv Driver, prefix string, err error)

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
//	file:///abs/path            a directory on the local disk (created if missing)
//	mem://[name]                a process-local in-memory store (for tests)
//	s3://bucket[/prefix]?endpoint=URL&region=R&path_style=true
//	gs://bucket[/prefix]
//
// A malformed URL, an unknown scheme, a missing bucket or missing credentials
// is an error that names the URL and says what to do.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &Error{Op: "open", URL: redact(rawURL), Kind: KindPermanent, Err: fmt.Errorf("not a valid URL: %w", err)}
	}
	o, ok := openers[u.Scheme]
	if !ok {
		return nil, &Error{Op: "open", URL: redactURL(u), Kind: KindPermanent,
			Err: fmt.Errorf("unknown scheme %q: use one of %s", u.Scheme, strings.Join(Schemes(), "://, ")+"://")}
	}
	drv, prefix, err := o(ctx, u)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, err
		}
		return nil, &Error{Op: "open", URL: redactURL(u), Kind: KindPermanent, Err: err}
	}
	s := New(storeURL(u), drv, opts)
	if prefix != "" {
		sub := s.Sub(prefix)
		sub.owner = true
		return sub, nil
	}
	return s, nil
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
