// Package posixtest is the POSIX conformance suite that every agentfs mount
// variant runs, proven against a plain local directory (ext4), plus the tree
// manifest used to compare whole workspaces.
//
// It is a test-support library: _test files of other packages import it and
// call Run with the directory under test. It owns no filesystem behaviour and
// must never import agentfs packages other than internal/testenv, so that the
// same checks judge a kernel mount, a virtual mount and a local directory
// alike. The reference is always "what ext4 does": a check that passes on a
// local ext4 directory and fails on a mount is a bug in the mount (or a
// documented, deliberate exclusion via Options.Exclude).
//
// What it offers:
//
//   - Checks: named, self-contained checks, each given a fresh empty
//     directory; Run runs them as subtests. Checks that need root say so in
//     their doc (see RootChecks) and report it through testenv.Missing.
//   - Populate and ReadOnlyChecks: a known tree and the checks that verify it
//     through a read-only mount, including that every write fails with EROFS.
//   - ManifestOf and Diff: a walk that records type, mode, owner, size,
//     content hash, times in nanoseconds, symlink targets, xattrs, link
//     counts and hard-link groups per path, and a readable difference of two
//     such walks.
//
// A mount test runs it like this (the variant supplies the mount):
//
//	func TestPOSIX(t *testing.T) {
//		mnt := mountForTest(t)
//		posixtest.Run(t, mnt, posixtest.Options{Exclude: map[string]string{
//			"Atime": "reads do not update atime (see fs/README)",
//		}})
//	}
//
// and compares whole trees like this:
//
//	before, err := posixtest.ManifestOf(hostDir, posixtest.ManifestOptions{})
//	// ... work in the mount ...
//	after, err := posixtest.ManifestOf(hostDir, posixtest.ManifestOptions{})
//	if d := posixtest.Diff(before, after, posixtest.IgnoreAtime); len(d) > 0 {
//		t.Errorf("host directory changed:\n%s", strings.Join(d, "\n"))
//	}
//
// Some checks (fcntl locks, permission checks as another uid) run part of
// their work in a child process: the test binary re-executes itself with an
// environment variable that this package's init function recognises. Any
// test binary that imports this package therefore supports that mode; it is
// inert unless the variable is set.
package posixtest
