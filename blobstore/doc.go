// Package blobstore is the lowest layer of agentfs: a concrete Store type over
// small provider drivers (file://, mem://, s3://, gs://). It owns talking to
// blob storage and nothing else: it knows nothing of chunks, trees or files,
// and must never import any other agentfs package.
//
// # Stores
//
// Open builds a Store from a URL:
//
//	file:///abs/path      a local directory (created only by Open with
//	                      Options.Create); PutIfAbsent is exclusive across
//	                      processes sharing it (flock)
//	mem://[name][/prefix] process-local memory, for tests; the same name shares objects
//	s3://[KEY:SECRET@]bucket[/prefix][?endpoint=URL&region=R&path_style=true&profile=P]
//	gs://bucket[/prefix]
//
// The path of an s3://, gs:// or mem:// URL is a key prefix (see Store.Sub).
//
// s3:// uses aws-sdk-go-v2 with the standard credential chain (AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY, AWS_PROFILE or profile=P, web identity, container
// and instance roles), or static KEY:SECRET userinfo in the URL (MinIO, tests).
// endpoint= and path_style=true select an S3-compatible server such as MinIO;
// region defaults to us-east-1 when an endpoint is given. Objects larger than
// 8 MiB, or of unknown size, are sent as multipart uploads (4 parts in flight);
// a failed upload is aborted. PutIfAbsent is a PUT (or multipart completion)
// with If-None-Match: *.
//
// gs:// uses cloud.google.com/go/storage with Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`),
// or, when STORAGE_EMULATOR_HOST is set, that emulator without authentication.
// Objects up to 16 MiB of known size go in one request, others as resumable
// uploads. PutIfAbsent is a write with the DoesNotExist precondition.
//
// Open checks the credentials and that the bucket (or file:// directory)
// exists; a bad URL, a missing bucket or directory or missing credentials is
// an error naming the URL (never its credentials) and saying what to do. A
// store is created only when Options.Create asks for it (creating a volume):
// a file:// directory that disappears later is never recreated by a write,
// which fails with a KindPermanent error instead.
//
// # What Store does for every driver
//
// Callers use *Store only. Key validation, retries of transient errors with
// jittered exponential backoff (bounded; a put is retried only when its
// reader can seek back), the concurrency limit, metrics (Metrics, exported to
// Prometheus by NewCollector) and error classification are written once, in
// Store; a Driver only talks to its provider and classifies its raw errors,
// and the providers' own client retries are turned off. A cancelled context
// ends every call promptly, mid-stream included, with an error matching
// context.Canceled (or DeadlineExceeded).
//
// Errors returned by Store are *Error values that wrap the provider's error and
// carry a Kind. Check them with errors.Is(err, ErrNotFound), errors.Is(err,
// ErrExists), errors.Is(err, ErrNoSpace), IsTransient(err), KindOf(err) or
// errors.As(err, &e) — never by message. A file:// store whose disk is full
// or whose quota is reached, and an S3 store that answers 507 (MinIO's
// XMinioStorageFull), fail a write with KindNoSpace ("out of space"), which
// Store does not retry; a read-only filesystem under a file:// store is
// KindPermanent.
//
// PutIfAbsent is the one conditional write: exactly one of several concurrent
// writers of a key wins, on every driver and across machines. When an attempt
// fails transiently and the retry finds the key taken by the same bytes, the
// earlier attempt is taken to have won; callers that need to tell "I wrote it"
// from "someone wrote the same bytes" must write distinct bytes (as a commit
// naming its writer does).
//
// # Testing
//
// Package blobstoretest is the conformance suite every driver and composite
// passes; package faulty wraps a Driver to inject failures, slowness and
// outages (build the Store with Options.WrapDriver or OpenDriver and New);
// internal/testservices starts MinIO and the GCS emulator for tests.
package blobstore
