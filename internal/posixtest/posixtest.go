package posixtest

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Checks maps the name of every read-write check to its function. Each
// function is given dir, an empty directory it may fill as it likes, on the
// filesystem under test; it fails t on any behaviour that differs from ext4.
// It needs no cleanup of its own: Run removes dir afterwards, and a check that
// uses scratch space outside dir takes it from t.TempDir. Checks are
// independent of each other and may run in parallel. Callers must not modify
// the map.
var Checks = map[string]func(t *testing.T, dir string){
	// Data.
	"CreateReadWrite": checkCreateReadWrite,
	"Holes":           checkHoles,
	"Truncate":        checkTruncate,
	"Append":          checkAppend,
	"OpenExcl":        checkOpenExcl,
	"OpenTrunc":       checkOpenTrunc,
	"UnlinkOpen":      checkUnlinkOpen,
	"Tmpfile":         checkTmpfile,
	"Fallocate":       checkFallocate,
	"CopyFileRange":   checkCopyFileRange,
	"LargeFile":       checkLargeFile,
	"Mmap":            checkMmap,
	"Fsync":           checkFsync,

	// Namespace.
	"MkdirRmdir":           checkMkdirRmdir,
	"RenameFile":           checkRenameFile,
	"RenameDir":            checkRenameDir,
	"RenameNoreplace":      checkRenameNoreplace,
	"RenameExchange":       checkRenameExchange,
	"HardLinks":            checkHardLinks,
	"Symlinks":             checkSymlinks,
	"NameMax":              checkNameMax,
	"OddNames":             checkOddNames,
	"DeepPaths":            checkDeepPaths,
	"ReaddirLarge":         checkReaddirLarge,
	"ReaddirWhileMutating": checkReaddirWhileMutating,
	"ConcurrentWriters":    checkConcurrentWriters,
	"Errnos":               checkErrnos,

	// Attributes and special files.
	"Chmod":                  checkChmod,
	"Chown":                  checkChown,
	"SetgidDir":              checkSetgidDir,
	"Utimens":                checkUtimens,
	"TimestampUpdates":       checkTimestampUpdates,
	"Atime":                  checkAtime,
	"AtimeDropCaches":        checkAtimeDropCaches,
	"Mkfifo":                 checkMkfifo,
	"MknodDevice":            checkMknodDevice,
	"DeviceOpen":             checkDeviceOpen,
	"SetuidExec":             checkSetuidExec,
	"FileHandles":            checkFileHandles,
	"UnixSocket":             checkUnixSocket,
	"Xattrs":                 checkXattrs,
	"Statfs":                 checkStatfs,
	"PermissionsAsOtherUser": checkPermissionsAsOtherUser,
	"KillPrivData":           checkKillPrivData,
	"KillPrivCaps":           checkKillPrivCaps,

	// Locks.
	"Flock":     checkFlock,
	"FcntlLock": checkFcntlLock,
	"OFDLock":   checkOFDLock,

	// Agent workloads.
	"WorkloadGit":    checkWorkloadGit,
	"WorkloadTar":    checkWorkloadTar,
	"WorkloadCp":     checkWorkloadCp,
	"WorkloadVenv":   checkWorkloadVenv,
	"WorkloadSQLite": checkWorkloadSQLite,
	"WorkloadRmRf":   checkWorkloadRmRf,
}

// RootChecks lists the checks of Checks that need root (CAP_CHOWN, CAP_MKNOD,
// CAP_SETUID, CAP_DAC_READ_SEARCH, writing /proc/sys/vm/drop_caches). Run as another user they report the missing privilege through
// testenv.Missing: a failure under CI=true, a skip with the reason elsewhere.
var RootChecks = []string{"Chown", "SetgidDir", "MknodDevice", "PermissionsAsOtherUser", "KillPrivData", "KillPrivCaps", "AtimeDropCaches", "DeviceOpen", "SetuidExec", "FileHandles"}

// Options selects what Run runs. The zero value runs every check of Checks,
// one after another.
type Options struct {
	// Exclude maps the name of a check this variant cannot do to the reason
	// why. Each excluded check still appears as a subtest, skipped with that
	// reason. A name that is not a check of the selected set fails the test,
	// so that a renamed check is not silently dropped.
	Exclude map[string]string

	// ReadOnly runs ReadOnlyChecks instead of Checks. mnt must then be the
	// directory Populate wrote, as the variant under test presents it (for
	// example mounted read-only); the checks write nothing.
	ReadOnly bool

	// Parallel runs the checks in parallel with each other (t.Parallel).
	Parallel bool
}

// Run runs the selected checks as subtests of t, in name order. For the
// read-write set, each check gets a fresh directory created under mnt and
// removed after the check; a failure to remove it fails the check, since a
// mount must be able to delete whatever it created. mnt itself is never
// modified otherwise.
func Run(t *testing.T, mnt string, opts Options) {
	t.Helper()
	checks := Checks
	if opts.ReadOnly {
		checks = ReadOnlyChecks
	}
	for name := range opts.Exclude {
		if _, ok := checks[name]; !ok {
			t.Fatalf("Options.Exclude names %q, which is not a check of this set", name)
		}
	}
	names := make([]string, 0, len(checks))
	for name := range checks {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fn := checks[name]
		t.Run(name, func(t *testing.T) {
			if reason, ok := opts.Exclude[name]; ok {
				t.Skipf("excluded for this variant: %s", reason)
			}
			if opts.Parallel {
				t.Parallel()
			}
			if opts.ReadOnly {
				fn(t, mnt)
				return
			}
			dir, err := os.MkdirTemp(mnt, strings.ReplaceAll(name, "/", "_")+"-")
			if err != nil {
				t.Fatalf("creating the check's directory under %s: %v", mnt, err)
			}
			t.Cleanup(func() {
				if err := os.RemoveAll(dir); err != nil {
					t.Errorf("removing the check's directory %s: %v", dir, err)
				}
			})
			fn(t, dir)
		})
	}
}
