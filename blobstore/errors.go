package blobstore

import (
	"context"
	"errors"
	"fmt"
)

// Kind classifies a storage error. Drivers map their raw errors to a Kind with
// Driver.Classify; Store attaches it to every error it returns.
type Kind int

const (
	// KindUnknown is an error the driver could not classify. Store treats it
	// as permanent (it is not retried).
	KindUnknown Kind = iota
	// KindNotFound: the object (or, for bucket-level operations, the bucket)
	// does not exist.
	KindNotFound
	// KindExists: a conditional create found an existing object.
	KindExists
	// KindTransient: a failure worth retrying (network errors, throttling,
	// 5xx responses, timeouts of a single attempt).
	KindTransient
	// KindPermanent: retrying will not help (bad credentials, access denied,
	// missing bucket, invalid argument).
	KindPermanent
	// KindCanceled: the caller's context was cancelled or its deadline passed.
	KindCanceled
	// KindNoSpace: the store has no room for the write (a file:// store's
	// disk is full or its quota is reached). Store does not retry it: room
	// comes back only when someone frees it; a caller that retries later
	// (the checkpoints) may succeed then.
	KindNoSpace

	lastKind = KindNoSpace
)

// String returns the kind's name as used in error messages ("not found",
// "exists", "transient", "permanent", "canceled", "out of space",
// "unknown").
func (k Kind) String() string {
	switch k {
	case KindNotFound:
		return "not found"
	case KindExists:
		return "exists"
	case KindTransient:
		return "transient"
	case KindPermanent:
		return "permanent"
	case KindCanceled:
		return "canceled"
	case KindNoSpace:
		return "out of space"
	default:
		return "unknown"
	}
}

// Sentinel errors matched by errors.Is against errors returned by Store.
var (
	// ErrNotFound matches errors for objects that do not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists matches a PutIfAbsent that lost: the key already holds an object.
	ErrExists = errors.New("object already exists")
	// ErrTransient matches errors that were (or could be) retried.
	ErrTransient = errors.New("transient storage error")
	// ErrNoSpace matches a write the store had no room for (KindNoSpace).
	ErrNoSpace = errors.New("the store is out of space")
)

// Error is the error type returned by every Store method. It names the
// operation, the store URL and the key, and wraps the provider's error.
type Error struct {
	Op   string // "get", "put", "put-if-absent", "stat", "list", "delete", "open"
	URL  string // the store URL, without credentials
	Key  string // the object key relative to the store, or the list prefix
	Kind Kind
	Err  error // the provider's error
}

// Error returns "blobstore: OP URL (key "KEY"): KIND: provider error". The URL
// never carries credentials.
func (e *Error) Error() string {
	where := e.URL
	if e.Key != "" {
		where = fmt.Sprintf("%s (key %q)", e.URL, e.Key)
	}
	return fmt.Sprintf("blobstore: %s %s: %s: %v", e.Op, where, e.Kind, e.Err)
}

// Unwrap returns the provider's error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel matching e's Kind. Cancellation
// also matches context.Canceled / context.DeadlineExceeded through Unwrap.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Kind == KindNotFound
	case ErrExists:
		return e.Kind == KindExists
	case ErrTransient:
		return e.Kind == KindTransient
	case ErrNoSpace:
		return e.Kind == KindNoSpace
	}
	return false
}

// KindOf returns the Kind of err: the Kind of the first *Error in its chain,
// KindCanceled for context errors, KindUnknown otherwise.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return KindCanceled
	}
	return KindUnknown
}

// IsTransient reports whether err is a transient storage error: the operation
// may succeed if tried again later.
func IsTransient(err error) bool { return KindOf(err) == KindTransient }
