package exec

import (
	"context"
	"fmt"
)

// Backend types, the values of Spec.Type.
const (
	TypeLocal  = "local"
	TypeDocker = "docker"
)

// Spec chooses a backend and its options as data: what `agentfs exec`'s
// flags, `agentfs serve`'s flags and the serve API's "backend" objects
// give. New is the one place that turns it into a Backend.
type Spec struct {
	// Type is TypeLocal ("" too) or TypeDocker.
	Type string `json:"type,omitempty"`
	// Image, User, Network, Memory, CPUs and Pids are the docker options
	// (see DockerOptions); they are refused for the local backend.
	Image   string  `json:"image,omitempty"`
	User    string  `json:"user,omitempty"`
	Network bool    `json:"network,omitempty"`
	Memory  int64   `json:"memory,omitempty"`
	CPUs    float64 `json:"cpus,omitempty"`
	Pids    int64   `json:"pids,omitempty"`
}

// Docker reports whether s names the docker backend.
func (s Spec) Docker() bool { return s.Type == TypeDocker }

// Validate checks s: a known type, an image for docker, no docker option
// for local, a numeric uid:gid user, no negative limit. Its errors wrap
// ErrInvalid and name the field.
func (s Spec) Validate() error {
	switch s.Type {
	case "", TypeLocal:
		if s != (Spec{Type: s.Type}) {
			return fmt.Errorf("backend %q: %w: image, user, network, memory, cpus and pids are options of the docker backend", TypeLocal, ErrInvalid)
		}
		return nil
	case TypeDocker:
	default:
		return fmt.Errorf("backend type %q: %w: want %q or %q", s.Type, ErrInvalid, TypeLocal, TypeDocker)
	}
	if s.Image == "" {
		return fmt.Errorf("docker backend: %w: no image given", ErrInvalid)
	}
	if s.Memory < 0 || s.CPUs < 0 || s.Pids < 0 {
		return fmt.Errorf("docker backend: %w: memory, cpus and pids cannot be negative (0 means no limit, or the default)", ErrInvalid)
	}
	if s.User != "" {
		if _, _, err := parseUser(s.User); err != nil {
			return err
		}
	}
	return nil
}

// UID returns the uid and gid of s.User, and false when s names no user.
func (s Spec) UID() (uid, gid int, ok bool) {
	uid, gid, err := parseUser(s.User)
	return uid, gid, err == nil
}

// New validates s and starts its backend on dir with opts: NewLocal, or
// NewDocker with s's options and labels added to the container's.
func (s Spec) New(ctx context.Context, dir string, opts Options, labels map[string]string) (*Backend, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !s.Docker() {
		return NewLocal(dir, opts)
	}
	return NewDocker(ctx, dir, DockerOptions{
		Options: opts, Image: s.Image, User: s.User, Network: s.Network,
		Memory: s.Memory, CPUs: s.CPUs, Pids: s.Pids, Labels: labels,
	})
}
