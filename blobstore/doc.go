// Package blobstore is the lowest layer of agentfs: a concrete Store type over
// small provider drivers (file://, mem://, s3://, gs://).
//
// Callers use *Store only. Validation of keys, retries with jittered
// exponential backoff for transient errors, the concurrency limit, metrics and
// error classification are written once, in Store; a Driver only talks to its
// provider and classifies its raw errors.
//
// Errors returned by Store are *Error values that wrap the provider's error and
// carry a Kind. Check them with errors.Is(err, ErrNotFound), errors.Is(err,
// ErrExists), IsTransient(err), or errors.As(err, &*Error) — never by message.
//
// This package must never import any other agentfs package.
package blobstore
