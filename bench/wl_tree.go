package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func treeWorkload() Workload {
	return Workload{
		Name: "tree",
		Doc:  "the system's own tar, ls, grep and cp over a generated source tree: tar -x, ls -lR cold and warm, grep -r, cp -r",
		Phases: []Phase{
			{Name: "tar-x", Op: "one file of the tree: tar -xf - of the whole tree (from memory) is timed together"},
			{Name: "ls-lR-cold", Op: "one file listed: ls -lR of the tree after dropping caches"},
			{Name: "ls-lR-warm", Op: "one file listed: ls -lR of the tree again, caches warm"},
			{Name: "grep-r", Op: "one file searched: grep -r of a string in no file, caches warm"},
			{Name: "cp-r", Op: "one file copied: cp -r of the tree to a new directory"},
		},
		run: runTree,
	}
}

// treeFanout is how many files each directory of a generated source tree
// holds (genSource).
const treeFanout = 50

// sourceTar returns a tar archive of n generated source files (genSource's
// tree, under src/) and their total size.
func sourceTar(rng *rand.Rand, n int) ([]byte, int64, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mod := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: mod})
	}
	if err := dir("src"); err != nil {
		return nil, 0, err
	}
	total, err := genSource(rng, n, dir, func(name string, body []byte) error {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: mod}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if err := tw.Close(); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), total, nil
}

// tool runs the system's name with args in dir, stdin from stdin (may be
// nil), and returns its standard output. Exit status 1 of grep ("no
// match") is not an error when okExit1 is set.
func tool(ctx context.Context, dir string, stdin []byte, okExit1 bool, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && okExit1 && ee.ExitCode() == 1 && stderr.Len() == 0 {
		err = nil
	}
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), dir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

func runTree(e *env) error {
	for _, t := range []string{"tar", "ls", "grep", "cp"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("the tree workload needs %s on PATH: %w", t, err)
		}
	}
	n := e.p.TreeFiles
	archive, total, err := sourceTar(e.rng, n)
	if err != nil {
		return err
	}
	files := int64(n)
	err = e.measure("tar-x", func(r *recorder) error {
		if _, err := tool(e.ctx, e.dir, archive, false, "tar", "-xf", "-"); err != nil {
			return err
		}
		r.bulk(files, total)
		return nil
	})
	if err != nil {
		return err
	}
	src := filepath.Join(e.dir, "src")
	// ls -lR prints one line per file and directory plus, per directory,
	// a header, a total and a blank line.
	dirs := int64((n + treeFanout - 1) / treeFanout)
	lsLR := func(r *recorder) error {
		out, err := tool(e.ctx, e.dir, nil, false, "ls", "-lR", "src")
		if err != nil {
			return err
		}
		if got := int64(bytes.Count(out, []byte(".go\n"))); got != files {
			return fmt.Errorf("ls -lR %s listed %d files, the tree has %d", src, got, files)
		}
		r.bulk(files+dirs, 0)
		return nil
	}
	// The cold listing needs only the tree's inodes dropped; fadvise
	// (which drops file pages) cannot do that, so it is given no files.
	// makeCold settles tar's writes first.
	if err := e.makeCold(nil); err != nil {
		return err
	}
	if err := e.measure("ls-lR-cold", lsLR); err != nil {
		return err
	}
	if err := e.measure("ls-lR-warm", lsLR); err != nil {
		return err
	}
	err = e.measure("grep-r", func(r *recorder) error {
		out, err := tool(e.ctx, e.dir, nil, true, "grep", "-r", "-l", "no such text in the tree", "src")
		if err != nil {
			return err
		}
		if len(out) != 0 {
			return fmt.Errorf("grep -r found text no generated file holds:\n%s", out)
		}
		r.bulk(files, total)
		return nil
	})
	if err != nil {
		return err
	}
	return e.measure("cp-r", func(r *recorder) error {
		if _, err := tool(e.ctx, e.dir, nil, false, "cp", "-r", "src", "copy"); err != nil {
			return err
		}
		r.bulk(files, total)
		return nil
	})
}
