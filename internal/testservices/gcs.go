package testservices

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"testing"

	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// EmulatorHostEnv is the environment variable through which
// cloud.google.com/go/storage (and so blobstore's gs:// driver) is pointed
// at an emulator.
const EmulatorHostEnv = "STORAGE_EMULATOR_HOST"

// gcsEmulator is one running fake-gcs-server.
type gcsEmulator struct {
	srv     *fakestorage.Server
	dir     string // filesystem backend root, removed by stop
	host    string // host:port
	prevEnv string // STORAGE_EMULATOR_HOST before start
	hadEnv  bool
}

var gcs = &shared[*gcsEmulator]{start: startGCS, stop: (*gcsEmulator).stop}

// StartGCSEmulator returns the URL (gs://BUCKET) of a new, empty bucket on a
// GCS emulator for t to use until it ends.
//
// The emulator is fake-gcs-server, run in this process on a loopback port
// with its filesystem backend in a temporary directory (under /dev/shm when
// the machine has one). Its uploads check
// generation preconditions (ifGenerationMatch=0, i.e. DoesNotExist) under
// the backend's lock, so exactly one of several racing conditional creates
// wins, as on GCS.
//
// The storage client finds the emulator only through the process-global
// STORAGE_EMULATOR_HOST variable, so StartGCSEmulator sets it to the
// emulator's host:port for as long as any test of the binary holds the
// emulator, and restores the previous value when the last one ends. While it
// is set, every gs:// URL opened in the process goes to the emulator
// without authentication: do not run a test against real GCS in parallel
// with one that uses the emulator in the same binary. The emulator is shared
// like MinIO (see the package doc). If it cannot be started,
// StartGCSEmulator reports it through testenv.Missing and does not return.
func StartGCSEmulator(t testing.TB) string {
	t.Helper()
	em, err := gcs.acquire(t)
	if err != nil {
		testenv.Missing(t, "GCS emulator (fake-gcs-server)", err)
	}
	if got := os.Getenv(EmulatorHostEnv); got != em.host {
		t.Fatalf("%s=%q but the GCS emulator listens on %s: a test changed it while the emulator was in use", EmulatorHostEnv, got, em.host)
	}
	bucket := bucketName()
	em.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	return (&url.URL{Scheme: "gs", Host: bucket}).String()
}

// memDir is where the emulator keeps its data when the machine has a
// memory-backed /dev/shm: its filesystem backend fsyncs every object, the
// bucket's metadata and the directory under one global lock, which makes a
// disk-backed emulator the slowest part of the tests.
func memDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "agentfs-probe-"); err == nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return "" // os.TempDir()
}

func startGCS() (*gcsEmulator, error) {
	dir, err := os.MkdirTemp(memDir(), "agentfs-gcs-")
	if err != nil {
		return nil, err
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:      "http",
		Host:        "127.0.0.1",
		Port:        0, // a free port, chosen by the listener
		PublicHost:  "127.0.0.1",
		StorageRoot: dir,
		Writer:      io.Discard,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start fake-gcs-server: %w", err)
	}
	u, err := url.Parse(srv.URL())
	if err != nil {
		srv.Stop()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("fake-gcs-server URL %q: %w", srv.URL(), err)
	}
	em := &gcsEmulator{srv: srv, dir: dir, host: u.Host}
	em.prevEnv, em.hadEnv = os.LookupEnv(EmulatorHostEnv)
	if err := os.Setenv(EmulatorHostEnv, em.host); err != nil {
		em.stop()
		return nil, err
	}
	return em, nil
}

// stop stops the emulator, restores STORAGE_EMULATOR_HOST and removes the
// data.
func (em *gcsEmulator) stop() {
	if em.hadEnv {
		_ = os.Setenv(EmulatorHostEnv, em.prevEnv)
	} else {
		_ = os.Unsetenv(EmulatorHostEnv)
	}
	em.srv.Stop()
	_ = os.RemoveAll(em.dir)
}
