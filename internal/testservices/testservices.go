// Package testservices starts the real storage services that agentfs tests
// run against: a MinIO server (S3) and the GCS emulator (fake-gcs-server).
// Tests call StartMinIO or StartGCSEmulator and get a store URL for a new,
// empty bucket of their own.
//
// Each service is shared by the tests of one test binary while any of them
// uses it: the first caller starts it, every caller takes a reference that
// its t.Cleanup drops, and the service stops (and its temporary data
// directory is removed) when the last reference is dropped. A test that
// wants one service for all its subtests calls Start once at its top; the
// subtests' calls then reuse the running service.
//
// When a service cannot be started the test is reported through
// testenv.Missing: it fails under CI=true and is skipped, with the reason,
// elsewhere. Nothing here skips silently.
//
// This package is for tests only; production code must not import it.
package testservices

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// shared is a service started on first use and stopped when its last user's
// test ends.
//
// Lock order: mu only.
type shared[S any] struct {
	mu    sync.Mutex
	refs  int // guarded by mu; users whose test has not ended
	svc   S   // guarded by mu; valid while refs > 0; a failed start is retried by the next user
	start func() (S, error)
	stop  func(S)
}

// acquire returns the running service, starting it if needed, and releases
// the reference when t ends.
func (s *shared[S]) acquire(t testing.TB) (S, error) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 {
		svc, err := s.start()
		if err != nil {
			var zero S
			return zero, err
		}
		s.svc = svc
	}
	s.refs++
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.refs--
		if s.refs == 0 {
			s.stop(s.svc)
			var zero S
			s.svc = zero
		}
	})
	return s.svc, nil
}

var bucketSeq atomic.Int64

// bucketName returns a new bucket name valid on S3 and GCS: lower case,
// 3-63 characters, unique within the process and across processes.
func bucketName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("agentfs-test-%d-%s", bucketSeq.Add(1), hex.EncodeToString(b[:]))
}
