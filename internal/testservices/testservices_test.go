package testservices

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestSharedRefcount(t *testing.T) {
	starts, stops := 0, 0
	s := &shared[int]{
		start: func() (int, error) { starts++; return starts, nil },
		stop:  func(int) { stops++ },
	}
	t.Run("users", func(t *testing.T) {
		t.Run("a", func(t *testing.T) {
			v, err := s.acquire(t)
			if err != nil || v != 1 {
				t.Fatalf("acquire = %d, %v", v, err)
			}
			t.Run("nested", func(t *testing.T) {
				if v, _ := s.acquire(t); v != 1 {
					t.Errorf("nested user got a new service %d", v)
				}
			})
			if stops != 0 {
				t.Error("stopped while a user remains")
			}
		})
		if starts != 1 || stops != 1 {
			t.Errorf("after the last user: %d starts, %d stops; want 1, 1", starts, stops)
		}
		t.Run("b", func(t *testing.T) {
			if v, _ := s.acquire(t); v != 2 {
				t.Errorf("a new user after the stop got %d, want a restarted service", v)
			}
		})
	})
	if starts != 2 || stops != 2 {
		t.Errorf("%d starts, %d stops; want 2, 2", starts, stops)
	}

	failing := &shared[int]{start: func() (int, error) { return 0, errors.New("no") }, stop: func(int) { t.Error("stop of a service that never started") }}
	if _, err := failing.acquire(t); err == nil {
		t.Error("acquire of a failing service succeeded")
	}
}

func TestMinIOPath(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTFS_MINIO", notExec)
	if _, err := MinIOPath(); err == nil {
		t.Error("AGENTFS_MINIO naming a non-executable file was accepted")
	}
	t.Setenv("AGENTFS_MINIO", dir)
	if _, err := MinIOPath(); err == nil {
		t.Error("AGENTFS_MINIO naming a directory was accepted")
	}
	t.Setenv("AGENTFS_MINIO", "")
	tools := t.TempDir()
	bin := filepath.Join(tools, "minio")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTFS_TOOLS", tools)
	if got, err := MinIOPath(); err != nil || got != bin {
		t.Errorf("MinIOPath with AGENTFS_TOOLS = %q, %v; want %q", got, err, bin)
	}
}

func TestStartMinIO(t *testing.T) {
	var endpoint string
	t.Run("use", func(t *testing.T) {
		a, b := StartMinIO(t), StartMinIO(t)
		ua, err := url.Parse(a)
		if err != nil {
			t.Fatal(err)
		}
		ub, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if ua.Host == ub.Host {
			t.Errorf("two callers share bucket %q", ua.Host)
		}
		q := ua.Query()
		endpoint = q.Get("endpoint")
		if endpoint == "" || q.Get("region") == "" || q.Get("path_style") != "true" || ua.User == nil {
			t.Fatalf("URL %s lacks endpoint, region, path_style or credentials", ua.Redacted())
		}
		if ub.Query().Get("endpoint") != endpoint {
			t.Errorf("two callers in one test got two servers")
		}
		// The bucket exists and is empty.
		srv, err := minio.acquire(t)
		if err != nil {
			t.Fatal(err)
		}
		out, err := srv.client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(ua.Host)})
		if err != nil || len(out.Contents) != 0 {
			t.Errorf("new bucket: %v objects, %v", len(out.Contents), err)
		}
	})
	// The last user is gone: the server stopped and its port is closed.
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		_ = c.Close()
		t.Errorf("MinIO still listens on %s after its last user ended", u.Host)
	}
}

func TestStartGCSEmulator(t *testing.T) {
	t.Setenv(EmulatorHostEnv, "previous.example:1")
	t.Run("use", func(t *testing.T) {
		raw := StartGCSEmulator(t)
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "gs" || u.Host == "" {
			t.Fatalf("URL %q", raw)
		}
		host := os.Getenv(EmulatorHostEnv)
		if host == "previous.example:1" {
			t.Fatal("STORAGE_EMULATOR_HOST not set to the emulator")
		}
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			t.Fatalf("emulator at %s: %v", host, err)
		}
		_ = c.Close()
		if other := StartGCSEmulator(t); other == raw {
			t.Error("two callers share a bucket")
		}
	})
	if got := os.Getenv(EmulatorHostEnv); got != "previous.example:1" {
		t.Errorf("STORAGE_EMULATOR_HOST = %q after the last user, want the previous value restored", got)
	}
}
