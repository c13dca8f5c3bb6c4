package posixtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/internal/testenv"
)

// needTool returns the path of an external program, or reports it missing
// through testenv.Missing.
func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testenv.Missing(t, name, err)
	}
	return p
}

// run runs a program in dir with extra environment and returns its standard
// output; a non-zero exit fails the test with the program's stderr. Each
// run is bounded by five minutes and killed after that.
func run(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\nstderr:\n%s\nstdout:\n%s", name, strings.Join(args, " "), dir, err, stderr.String(), stdout.String())
	}
	return stdout.String()
}

// wantNoDiff fails with the differences, if any, between two manifests.
func wantNoDiff(t testing.TB, what string, a, b Manifest, ignore ...Ignore) {
	t.Helper()
	if d := Diff(a, b, ignore...); len(d) > 0 {
		if len(d) > 40 {
			d = append(d[:40], fmt.Sprintf("… and %d more", len(d)-40))
		}
		t.Errorf("%s: trees differ:\n%s", what, strings.Join(d, "\n"))
	}
}

// manifest is ManifestOf that fails the test on error.
func manifest(t testing.TB, root string) Manifest {
	t.Helper()
	m, err := ManifestOf(root, ManifestOptions{})
	ok(t, "manifest", err)
	return m
}

// gitEnv isolates git from the machine's configuration and fixes identities
// and dates, so that commit ids are reproducible.
func gitEnv(t testing.TB) []string {
	return []string{
		"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=agentfs", "GIT_AUTHOR_EMAIL=agentfs@example.invalid",
		"GIT_COMMITTER_NAME=agentfs", "GIT_COMMITTER_EMAIL=agentfs@example.invalid",
		"GIT_AUTHOR_DATE=2024-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2024-01-02T03:04:05Z",
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
	}
}

// checkWorkloadGit: init, add, commit, status (including a same-size edit
// git must notice), branch, checkout, merge, gc and fsck on a generated
// repository of a few hundred nested files; the resulting commit ids equal
// those of the same steps on local scratch disk.
func checkWorkloadGit(t *testing.T, dir string) {
	git := needTool(t, "git")
	want := gitReference(t, git)
	got := gitWorkload(t, git, join(dir, "repo"))
	if got != want {
		t.Errorf("the same git steps give commit ids\n%s\nhere, but\n%s\non local disk", got, want)
	}
}

// gitRef caches the commit ids of gitWorkload on local scratch disk, which
// every run of WorkloadGit in the process compares against.
var gitRef struct {
	mu  sync.Mutex
	ids string
}

// gitReference returns gitWorkload's result on local scratch disk, computing
// it on first use.
func gitReference(t *testing.T, git string) string {
	t.Helper()
	gitRef.mu.Lock()
	defer gitRef.mu.Unlock()
	if gitRef.ids == "" {
		gitRef.ids = gitWorkload(t, git, join(t.TempDir(), "repo"))
	}
	return gitRef.ids
}

func gitWorkload(t *testing.T, git, repo string) string {
	files := genTree(t, repo, treeSpec{seed: 11, files: 200, dirs: 30, depth: 5})
	env := gitEnv(t)
	g := func(args ...string) string {
		t.Helper()
		return run(t, repo, env, git, args...)
	}
	g("init", "-q", "-b", "main")
	g("add", "-A")
	g("commit", "-q", "-m", "initial")
	if s := g("status", "--porcelain"); s != "" {
		t.Fatalf("git status right after the first commit:\n%s", s)
	}
	tracked := strings.Count(g("ls-files"), "\n")
	var onDisk int
	err := filepath.WalkDir(repo, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && e.Name() == ".git" {
			return filepath.SkipDir
		}
		if !e.IsDir() {
			onDisk++
		}
		return nil
	})
	ok(t, "walk", err)
	if tracked != onDisk {
		t.Errorf("git tracks %d paths, %d files and symlinks on disk", tracked, onDisk)
	}

	// Edits: append, delete, mode change, a same-size in-place edit (git must
	// not trust a stale index entry), and a new file.
	at := func(p string) string { return join(repo, p) }
	ok(t, "append", appendTo(at(files[0]), "changed\n"))
	ok(t, "remove", os.Remove(at(files[1])))
	if lstat(t, at(files[2])).Mode&0o100 != 0 {
		ok(t, "chmod", os.Chmod(at(files[2]), 0o644))
	} else {
		ok(t, "chmod", os.Chmod(at(files[2]), 0o755))
	}
	sameSize := files[3]
	for _, f := range files[3:] {
		if lstat(t, at(f)).Size > 0 {
			sameSize = f
			break
		}
	}
	content := readFile(t, at(sameSize))
	content[0] ^= 0x20
	fd := open(t, at(sameSize), unix.O_WRONLY, 0)
	pwriteAll(t, fd, content[:1], 0)
	closeFD(t, &fd)
	writeFile(t, at("added.txt"), []byte("new file\n"), 0o644)
	want := []string{" D " + files[1], " M " + files[0], " M " + files[2], " M " + sameSize, "?? added.txt"}
	slices.Sort(want)
	got := strings.Split(strings.TrimSuffix(g("status", "--porcelain"), "\n"), "\n")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("git status --porcelain after edits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	g("add", "-A")
	g("commit", "-q", "-m", "second")

	g("checkout", "-q", "-b", "feature")
	writeFile(t, at("feature.txt"), []byte("feature work\n"), 0o644)
	ok(t, "append", appendTo(at(files[4]), "feature edit\n"))
	g("add", "-A")
	g("commit", "-q", "-m", "feature")
	g("checkout", "-q", "main")
	var st unix.Stat_t
	wantErrno(t, "feature.txt on main", unix.Lstat(at("feature.txt"), &st), unix.ENOENT)
	if bytes.HasSuffix(readFile(t, at(files[4])), []byte("feature edit\n")) {
		t.Errorf("checkout main left the feature branch's edit of %s", files[4])
	}
	if b := g("branch", "--format=%(refname:short)"); b != "feature\nmain\n" {
		t.Errorf("git branch: %q", b)
	}
	if l := g("log", "--format=%s"); l != "second\ninitial\n" {
		t.Errorf("git log on main: %q", l)
	}
	g("merge", "-q", "--ff-only", "feature")
	wantContent(t, at("feature.txt"), []byte("feature work\n"))
	g("gc", "-q", "--prune=now")
	g("fsck", "--full", "--strict", "--no-progress")
	if s := g("status", "--porcelain"); s != "" {
		t.Errorf("git status after merge and gc:\n%s", s)
	}
	return g("rev-parse", "HEAD", "HEAD^{tree}", "feature~1")
}

// checkWorkloadTar: a generated tree (hard links, FIFO, xattrs, setuid and
// sticky modes, odd names, nanosecond times) archived on local disk and
// extracted into dir is identical to the original except for atime and
// ctime; archived again from dir and extracted on local disk, too.
func checkWorkloadTar(t *testing.T, dir string) {
	tar := needTool(t, "tar")
	scratch := t.TempDir()
	src := join(scratch, "src")
	genTree(t, src, treeSpec{seed: 21, files: 150, dirs: 20, depth: 4, special: true})
	want := manifest(t, src)
	flags := []string{"--format=posix", "--xattrs", "--xattrs-include=user.*", "--numeric-owner"}
	run(t, scratch, nil, tar, append(flags, "-cf", join(scratch, "in.tar"), "-C", scratch, "src")...)
	run(t, dir, nil, tar, append(flags, "-xpf", join(scratch, "in.tar"), "-C", dir)...)
	wantNoDiff(t, "tar -x into the directory", want, manifest(t, join(dir, "src")), IgnoreAtime, IgnoreCtime)

	run(t, dir, nil, tar, append(flags, "-cf", join(scratch, "out.tar"), "-C", dir, "src")...)
	out := join(scratch, "out")
	ok(t, "mkdir", os.Mkdir(out, 0o755))
	run(t, out, nil, tar, append(flags, "-xpf", join(scratch, "out.tar"), "-C", out)...)
	wantNoDiff(t, "tar -c from the directory, extracted on local disk", want, manifest(t, join(out, "src")), IgnoreAtime, IgnoreCtime)
}

// checkWorkloadCp: cp -a of a generated tree into dir and back out keeps
// content, modes, owners, times (atime included), xattrs, hard links and
// symlinks; only ctime differs.
func checkWorkloadCp(t *testing.T, dir string) {
	cp := needTool(t, "cp")
	scratch := t.TempDir()
	src := join(scratch, "src")
	genTree(t, src, treeSpec{seed: 31, files: 150, dirs: 20, depth: 4, special: true})
	want := manifest(t, src)
	run(t, scratch, nil, cp, "-a", src, join(dir, "copy"))
	wantNoDiff(t, "cp -a into the directory", want, manifest(t, join(dir, "copy")), IgnoreCtime)
	run(t, scratch, nil, cp, "-a", join(dir, "copy"), join(scratch, "out"))
	wantNoDiff(t, "cp -a out of the directory", want, manifest(t, join(scratch, "out")), IgnoreCtime)
}

// checkWorkloadVenv: python3 -m venv creates a working environment in dir;
// a package placed in its site-packages imports, its bytecode cache is
// written and reused, and an edit is picked up. (Without pip: installing
// pip's 1,600 files costs 6 s on local disk, and the creates, writes and
// imports it does are covered here and by the other workloads.)
func checkWorkloadVenv(t *testing.T, dir string) {
	py := needTool(t, "python3")
	venv := join(dir, "venv")
	run(t, dir, nil, py, "-m", "venv", "--without-pip", venv)
	vpy := join(venv, "bin", "python")
	env := []string{"PYTHONDONTWRITEBYTECODE="}
	if got := strings.TrimSpace(run(t, dir, env, vpy, "-c", "import sys; print(sys.prefix)")); got != venv {
		t.Errorf("venv python's sys.prefix %q, want %q", got, venv)
	}
	site := strings.TrimSpace(run(t, dir, env, vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"))
	if !strings.HasPrefix(site, venv) {
		t.Fatalf("site-packages %q is outside the venv", site)
	}
	pkg := join(site, "agentfs_probe")
	ok(t, "mkdir", os.Mkdir(pkg, 0o755))
	writeFile(t, join(pkg, "__init__.py"), []byte("from .mod import answer\n"), 0o644)
	writeFile(t, join(pkg, "mod.py"), []byte("def answer():\n    return 42\n"), 0o644)
	probe := "import agentfs_probe, sys; print(agentfs_probe.answer(), agentfs_probe.__file__.startswith(sys.prefix))"
	for i := range 2 {
		if got := strings.TrimSpace(run(t, dir, env, vpy, "-c", probe)); got != "42 True" {
			t.Errorf("import from the venv (run %d): %q", i, got)
		}
	}
	caches, err := filepath.Glob(join(pkg, "__pycache__", "mod.*.pyc"))
	ok(t, "glob", err)
	if len(caches) != 1 {
		t.Errorf("bytecode cache files for mod.py: %q, want one", caches)
	}
	// A different size invalidates the cache even within the same second.
	writeFile(t, join(pkg, "mod.py"), []byte("def answer():\n    return 4242\n"), 0o644)
	if got := strings.TrimSpace(run(t, dir, env, vpy, "-c", probe)); got != "4242 True" {
		t.Errorf("import after editing the module: %q", got)
	}
}

// sqliteScript exercises SQLite the way tools do: WAL mode (shared memory
// map, fcntl locks), concurrent reader and writer connections, checkpoint,
// then rollback-journal mode and VACUUM, with integrity checks.
const sqliteScript = `
import json, sqlite3, sys
path = sys.argv[1]
w = sqlite3.connect(path, isolation_level=None)
res = {"wal": w.execute("pragma journal_mode=wal").fetchone()[0]}
w.execute("create table t (id integer primary key, v text)")
r = sqlite3.connect(path, isolation_level=None)
seen = []
for batch in range(20):
    w.execute("begin")
    for i in range(100):
        w.execute("insert into t (v) values (?)", ("x" * (i % 50) + str(batch),))
    w.execute("commit")
    seen.append(r.execute("select count(*) from t").fetchone()[0])
res["seen"] = seen
res["checkpoint"] = w.execute("pragma wal_checkpoint(truncate)").fetchone()[0]
res["integrity_wal"] = w.execute("pragma integrity_check").fetchone()[0]
r.close()
res["delete"] = w.execute("pragma journal_mode=delete").fetchone()[0]
w.execute("delete from t where id % 2 = 0")
w.execute("vacuum")
res["count"] = w.execute("select count(*) from t").fetchone()[0]
res["integrity"] = w.execute("pragma integrity_check").fetchone()[0]
w.close()
print(json.dumps(res))
`

// checkWorkloadSQLite: a SQLite database in dir works in WAL mode with a
// concurrent reader and in rollback-journal mode with VACUUM, and passes
// its integrity check (python3's sqlite3 module).
func checkWorkloadSQLite(t *testing.T, dir string) {
	py := needTool(t, "python3")
	out := run(t, dir, nil, py, "-c", sqliteScript, join(dir, "db.sqlite"))
	var res struct {
		WAL          string `json:"wal"`
		Seen         []int  `json:"seen"`
		Checkpoint   int    `json:"checkpoint"`
		IntegrityWAL string `json:"integrity_wal"`
		Delete       string `json:"delete"`
		Count        int    `json:"count"`
		Integrity    string `json:"integrity"`
	}
	ok(t, "decode sqlite result "+out, json.Unmarshal([]byte(out), &res))
	if res.WAL != "wal" || res.Delete != "delete" {
		t.Errorf("journal modes %q and %q, want wal and delete", res.WAL, res.Delete)
	}
	for i, n := range res.Seen {
		if n != (i+1)*100 {
			t.Errorf("reader saw %d rows after batch %d, want %d", n, i, (i+1)*100)
			break
		}
	}
	if res.Checkpoint != 0 || res.IntegrityWAL != "ok" || res.Integrity != "ok" || res.Count != 1000 {
		t.Errorf("sqlite: checkpoint busy=%d, integrity %q/%q, %d rows (want 0, ok/ok, 1000)", res.Checkpoint, res.IntegrityWAL, res.Integrity, res.Count)
	}
	if left, _ := filepath.Glob(join(dir, "db.sqlite-*")); len(left) != 0 {
		t.Errorf("journal files left after closing: %q", left)
	}
}

// checkWorkloadRmRf: rm -rf removes a deep, wide and bushy tree (with
// symlinks, a FIFO and read-only files) completely.
func checkWorkloadRmRf(t *testing.T, dir string) {
	rm := needTool(t, "rm")
	tree := join(dir, "tree")
	deep := join(tree, "deep") + strings.Repeat("/level", 80)
	mkdirAll(t, deep)
	for p := deep; p != tree; p = filepath.Dir(p) {
		writeFile(t, join(p, "f"), []byte(p), 0o644)
	}
	mkdirAll(t, join(tree, "wide"))
	for i := range 1000 {
		writeFile(t, join(tree, "wide", fmt.Sprintf("file-%04d", i)), nil, 0o644)
	}
	for i := range 30 {
		d := join(tree, "bushy", fmt.Sprintf("d%02d", i), "sub")
		mkdirAll(t, d)
		for j := range 10 {
			writeFile(t, join(d, fmt.Sprintf("f%02d", j)), []byte("x"), 0o444)
		}
		ok(t, "symlink", os.Symlink("../sub", join(d, "up")))
	}
	ok(t, "mkfifo", unix.Mkfifo(join(tree, "fifo"), 0o644))
	run(t, dir, nil, rm, "-rf", tree)
	var st unix.Stat_t
	wantErrno(t, "lstat after rm -rf", unix.Lstat(tree, &st), unix.ENOENT)
	if left := listDir(t, dir); len(left) != 0 {
		t.Errorf("left after rm -rf: %q", left)
	}
	if n := lstat(t, dir).Nlink; n != 2 {
		t.Errorf("parent nlink after rm -rf %d, want 2", n)
	}
}
