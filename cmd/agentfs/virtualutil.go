package main

// Virtual mode on the CLI side: what `agentfs mount --virtual` mounts, the
// mount server's diff/commit/discard (control.VirtualBackend), and the
// path arguments of `agentfs diff`, `commit` and `discard`.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

// virtualTarget is the workspace `agentfs mount --virtual` mounts.
type virtualTarget struct {
	name    string
	base    overlay.Base // zero: an existing workspace's, or the default branch's head
	baseArg string       // --base as the server is given it (a host directory made absolute)
}

// resolveVirtual checks the virtual-mode flags and resolves them for the
// mount point mnt (absolute, symlinks resolved): nil without --virtual.
func resolveVirtual(mnt string, f mountFlags) (*virtualTarget, error) {
	if !f.virtual {
		switch {
		case f.base != "":
			return nil, errors.New("--base is the base of a virtual workspace: add --virtual")
		case f.name != "":
			return nil, errors.New("--name names a virtual workspace: add --virtual")
		}
		return nil, nil
	}
	if f.readOnly {
		return nil, errors.New("--virtual and --read-only: a virtual mount is a writable copy-on-write workspace; to look at a volume without changing it, mount it --read-only alone")
	}
	if f.base != "" && f.branchSet {
		return nil, fmt.Errorf("--branch and --base both name the base: give one (--base branch:%s)", f.branch)
	}
	v := &virtualTarget{name: f.name}
	switch {
	case f.base != "" && isHostDirArg(f.base):
		dir, err := hostDirBase(f.base)
		if err != nil {
			return nil, err
		}
		if within(mnt, dir) || within(dir, mnt) {
			return nil, fmt.Errorf("--base %s and the mount point %s: neither may lie inside the other (the workspace would read itself); mount it elsewhere", dir, mnt)
		}
		v.base, v.baseArg = overlay.Base{HostDir: dir}, dir
	case f.base != "":
		if st, err := os.Stat(f.base); err == nil && st.IsDir() {
			return nil, fmt.Errorf("--base %s: there is a directory %s here; write ./%s for that directory, or snapshot:%s / branch:%s for the volume's", f.base, f.base, f.base, f.base, f.base)
		}
		v.base, v.baseArg = overlay.Base{Ref: f.base}, f.base
	case f.branchSet:
		v.base, v.baseArg = overlay.Base{Ref: "branch:" + f.branch}, "branch:"+f.branch
	}
	if v.name == "" {
		v.name = defaultWorkspaceName(mnt)
	}
	if err := snapshot.ValidateName("workspace", overlay.BranchName(v.name)); err != nil {
		return nil, fmt.Errorf("--name %s: %w", v.name, err)
	}
	return v, nil
}

// isHostDirArg tells a host directory from a reference: references never
// hold a '/'.
func isHostDirArg(s string) bool {
	return strings.ContainsRune(s, '/') || s == "." || s == ".."
}

// hostDirBase makes the host directory dir absolute, with symlinks
// resolved, and checks that it is a directory.
func hostDirBase(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--base %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("--base %s: %w", dir, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("--base %s: %w", dir, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("--base %s is not a directory", dir)
	}
	return real, nil
}

// defaultWorkspaceName derives a workspace name from this host and the
// mount point: mounting on the same directory again finds the same
// workspace, and two mount points never share one by accident.
func defaultWorkspaceName(mnt string) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host + "\x00" + mnt))
	var b strings.Builder
	for _, r := range filepath.Base(mnt) {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	base := strings.TrimLeft(b.String(), ".-")
	if base == "" {
		base = "ws"
	}
	return base + "-" + hex.EncodeToString(sum[:4])
}

// virtualSuffix describes a virtual mount for the mount's messages.
func virtualSuffix(v *control.VirtualInfo) string {
	switch {
	case v == nil:
		return ""
	case v.HostDir != "":
		return ", virtual workspace " + v.Name + " over " + v.HostDir
	case v.Base != "":
		return ", virtual workspace " + v.Name + " over " + v.Base
	}
	return ", virtual workspace " + v.Name
}

// workspacePaths turns the PATHS arguments of diff, commit and discard
// into paths relative to the root of the mount at mnt. A path that,
// taken from the current directory, lies inside the mount is taken that
// way (so `cd MNT/src && agentfs commit MNT main.go` works); any other
// relative path is relative to the mount's root; an absolute path outside
// the mount is an error.
func workspacePaths(mnt string, args []string) ([]string, error) {
	var out []string
	cwd, _ := os.Getwd()
	for _, a := range args {
		abs := a
		if !filepath.IsAbs(a) && cwd != "" {
			abs = filepath.Join(cwd, a)
		}
		abs = filepath.Clean(abs)
		switch {
		case within(abs, mnt):
			rel, err := filepath.Rel(mnt, abs)
			if err != nil {
				return nil, err
			}
			if rel == "." {
				rel = ""
			}
			out = append(out, filepath.ToSlash(rel))
		case filepath.IsAbs(a):
			return nil, fmt.Errorf("%s lies outside the mount %s: give paths inside it, or relative to its root", a, mnt)
		default:
			p := path.Clean(filepath.ToSlash(a))
			if p == ".." || strings.HasPrefix(p, "../") {
				return nil, fmt.Errorf("%s lies outside the mount %s: give paths inside it, or relative to its root", a, mnt)
			}
			if p == "." {
				p = ""
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// findWorkspace finds the mount args[0] names and resolves the PATHS that
// follow it (see workspacePaths): the start of diff, commit and discard.
func findWorkspace(ctx context.Context, args []string) (*control.Client, []string, error) {
	cl, err := findMount(ctx, args[0])
	if err != nil {
		return nil, nil, err
	}
	paths, err := workspacePaths(cl.MountPoint(), args[1:])
	if err != nil {
		return nil, nil, err
	}
	return cl, paths, nil
}
