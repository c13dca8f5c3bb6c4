// Package fs puts an agentfs volume (a cache.Volume, the engine) behind a
// FUSE mount with go-fuse v2. It is the thin layer between the kernel and
// the engine: it translates requests and errors and chooses how the kernel
// caches; the filesystem's behaviour lives in cache/ (and overlay/). It
// must never import exec/, bench/ or cmd/, and never run commands inside a
// mount it serves.
//
// # Nodes
//
// One node type serves every inode (directories, files, symlinks, special
// files); it embeds fs.Inode and holds nothing but the engine's inode
// number, which is also the FUSE node ID (go-fuse's ExternalNodeID: the
// engine never reuses an inode number, so the kernel and the engine name
// inodes alike and notifications need no table). New inodes are owned by
// the caller's uid and gid (fuse.Caller), with the mode the kernel passes
// (umask applied).
//
// # Errors
//
// Every engine error becomes an errno in Errno (errno.go), one table: a
// cancelled request is EINTR, every cache error kind has one errno, ENOSPC
// and EDQUOT of the local disk pass through, anything else is EIO and one
// log line. A panic in any handler is recovered at the edge (go-fuse's
// PanicHandler, panicHandler here): logged with its stack, answered EIO.
//
// # Kernel caching
//
// A volume has one writer, and every change to a mounted volume passes
// through this machine's kernel, which updates or drops what it caches as
// it forwards the change. So the mount lets the kernel cache much longer
// than a loopback may:
//
//   - entries, negative entries ("no such file") and attributes for
//     CacheTimeout (DefaultCacheTimeout, one hour);
//   - file data across opens (FOPEN_KEEP_CACHE), with explicit data cache
//     control: the kernel never drops a file's pages just because its
//     mtime changed;
//   - directory listings across opens (FOPEN_CACHE_DIR), dropped by any
//     change of the directory;
//   - symlink targets (symlinks never change in place).
//
// FLUSH (sent at every close(2)) is asked for only where it does
// something (openFlags, noFlushAt): by a descriptor that may write while
// someone reads the change feed, which reports the file modified at that
// close. Every other descriptor is opened with FOPEN_NOFLUSH, and what a
// writer's FLUSH would persist (the file's size and times, an inline
// file's bytes) its RELEASE persists instead, which the kernel sends
// right after close(2) returns unless a dup, a fork or a mapping still
// holds the open file (then at the last of those; until then the
// checkpoints persist it, as they do any file still open); the change
// feed reports what the descriptor wrote at that RELEASE. A write(2)
// still returns only once its bytes are in the engine, and fsync is
// unchanged
// (README, "Durability"; TestKillAfterCloseWithoutFlush). What is lost
// is close(2) reporting an error of that persist: the RELEASE logs it.
//
// # Requests per file
//
// The FUSE round trip (about 30 µs on the 2-core machine of
// BENCHMARKS.md) is what separates a mount from the local disk on small
// files, so each request a workload sends per file is accounted for here,
// with its cause in the kernel (6.18, fs/fuse) and why the server cannot
// answer it away (agentfs bench reports these counts per phase;
// BENCHMARKS.md run F). With the kernel's caches warm:
//
//   - create (open O_CREAT|O_EXCL, write, close): LOOKUP, CREATE,
//     GETXATTR, WRITE, RELEASE, GETATTR: 6.
//   - tar -x (GNU tar 1.34 as root: the create, then futimens, fchown,
//     fchmod): the create's 6, three SETATTR, a second GETXATTR (the
//     fchown's), and a second WRITE where a file's data crosses one of
//     tar's 10 KiB records: 10.4.
//   - cp -r (coreutils 9.1: stat and open of the source, the create,
//     copy_file_range): GETATTR of the source, OPEN, RELEASE of the
//     source, LOOKUP, CREATE, GETXATTR, COPY_FILE_RANGE, RELEASE,
//     GETATTR of the directory: 9.
//   - git add -A (git 2.39, per file of a fresh tree): the file's lstat,
//     OPEN, READ, RELEASE; access(2) of the object's name (LOOKUP); its
//     temporary file created and written (LOOKUP, CREATE, GETATTR of the
//     directory, GETXATTR, WRITE, RELEASE), link(2)ed to the object's
//     name (LOOKUP, LINK) and unlinked (GETATTR of the directory,
//     UNLINK); a mkdir of an object directory for one file in four, with
//     its LOOKUPs; the rest (4.3 LOOKUP and 3.0 GETATTR in all) are
//     lstats of the tree's files, whose attributes their write or git's
//     read dropped: 16.7.
//
// Why each stays:
//
//   - LOOKUP before CREATE (fuse_atomic_open): the kernel looks a name up
//     before creating it unless a valid negative entry is cached, and with
//     O_EXCL (and for link, mkdir, symlink) it revalidates even a cached
//     negative entry (fuse_dentry_revalidate fails a negative dentry under
//     LOOKUP_EXCL). The mount already caches negative entries for an hour.
//   - GETATTR of the directory after a create, link or unlink in it:
//     the kernel drops the directory's attributes at every change of it
//     (fuse_dir_changed) and, with default_permissions, fetches them before
//     the next permission check there (fuse_permission). A reply carries
//     no attributes of the parent; only checking permissions in the server
//     (no default_permissions, see "Permissions") would remove it.
//   - GETXATTR of security.capability at the first write(2) of a new file
//     (and at the first write after each GETATTR): the kernel's check for
//     privileges to drop (file_remove_privs). FUSE_HANDLE_KILLPRIV_V2 lets
//     the kernel remember the answer in the inode (S_NOSEC), but FUSE
//     forgets it whenever it loads the inode's attributes
//     (fuse_change_attributes_common), which the CREATE reply does (measured:
//     ten writes, one GETXATTR; five writes each followed by a stat,
//     five). copy_file_range asks the same (file_modified) and chown asks
//     unconditionally (notify_change with ATTR_KILL_PRIV), hence tar's
//     second. Nothing the server answers stops it short of failing every
//     getxattr of the mount (ENOSYS, which loses user.* too); the kernel
//     skips the write's check only for FOPEN_DIRECT_IO writes
//     (Tuning.DirectWrite, an experiment: 200 creates of two writes each
//     went from 12 to 9 requests a file — GETXATTR 1→0, WRITE 3→2, READ
//     2→1 — BENCHMARKS.md run D; not the default: what was written is not
//     in the page cache, so the next read of the file, such as git add's
//     of the files an agent wrote, is a READ, and a direct-io open keeps
//     the file out of passthrough).
//   - WRITE per write(2): writes are write-through (below).
//   - RELEASE per open: it ends the engine's open of the file (open
//     counts, files unlinked while open, passthrough pins); the kernel
//     skips it only when the server has no opens at all (ENOSYS to OPEN).
//     It is asynchronous: close(2) does not wait for it.
//   - SETATTR per futimens, fchown, fchmod: one per call, as the kernel
//     sends them.
//   - GETATTR of the source in cp -r (and of a file stat(2)ed after a
//     READ): the kernel drops the file's cached atime after a READ
//     (fuse_invalidate_atime), whatever the mount's atime option, and
//     stat(2) asks for it; the tree workload greps the tree before
//     copying it. (Measured on 100 files a shell wrote with O_TRUNC and
//     no read: cp -r sent 101 GETATTR and 202 LOOKUP; after a cat of
//     each, 201 and 102. Why a file created with O_CREAT|O_TRUNC is
//     looked up again at its next stat(2), where one created with O_EXCL
//     gets a GETATTR, is not known yet; it costs one request either way.)
//   - READ of a file just written (git add): a write-through write of
//     less than a whole page leaves the page not up to date, so the first
//     read of a small file written through this mount reads it.
//   - LOOKUP for git's link(2) to the object name it just checked with
//     access(2): the negative entry is revalidated under LOOKUP_EXCL, as
//     above.
//
// A file listed by `ls -l` costs nothing beyond its attributes: see
// "Extended attributes".
//
// What the engine changes on its own (restoring a snapshot, discarding
// changes, a read-only mount following its branch) the kernel cannot see:
// whoever makes such a change calls Server.InvalidateInode,
// Server.InvalidateEntry or Server.InvalidateAll (go-fuse's NotifyContent
// and NotifyEntry underneath) once it is done; another process does the
// same through the mount's control socket (fs/control Client.Invalidate).
// They must never be called from a FUSE request handler of the same mount:
// the kernel may need a lock the request holds. Negative entries directly in the root survive
// InvalidateAll; a change that creates names in the root invalidates them
// one by one.
//
// Writes are write-through: the kernel's write-back cache is off. With it
// on, every small file cost two more round trips (SETATTR of the times at
// close and before unlink), 1 GiB sequential writes were no faster, and
// two ext4 behaviours broke (truncate(2) to the same size must update
// mtime; syncfs after deleting recently written files failed). It would
// also weaken the engine's guarantee that a returned write(2) is in the
// mount's local cache (surviving a kill of the server). Requests carry up
// to 1 MiB (max_write), and a server running as root raises the mount's
// read-ahead window to 4 MiB (one engine chunk; FUSE_INIT can only lower
// the kernel's 128 KiB default), which sped cold sequential reads up by
// half. FUSE_HANDLE_KILLPRIV_V2 is negotiated, so the
// kernel does not ask for security.capability before each write; the
// server drops set-user-ID and set-group-ID bits and capabilities on the
// writes, truncates and chowns of unprivileged callers instead (raw.go),
// and on their fallocates (every mode, as ext4), for which the kernel sends
// no flag: the server reads the caller's CAP_FSETID (and, for a set-group-ID
// file that is not group-executable, its groups) from /proc/PID/status.
// Access times follow Options.Atime: noatime by default, relatime or
// strictatime on request (`agentfs mount --atime`). FUSE leaves atime to the
// server and reads served from the page cache never reach it, so an access
// is counted when a file is opened for reading or a directory opened
// (touchAtime, atime.go): strictatime updates once per open, not per
// read(2). noatime stays the default: an update is a database write, dirties
// the inode for the next commit, and, measured on this 2-core machine under
// load (open, read and close of 2,000 100-byte files, median of 6 passes),
// strictatime cost 64-105 µs a file against noatime's 29-39, and the first
// read after a write under relatime 95-685 µs against 42-65 (later relatime
// reads 42-84). Without root the mount cannot carry the strictatime flag
// (fusermount3 3.14 knows none) and reports relatime. The numbers behind
// these choices are in scripts/mount-perf.sh's output, reported with the
// commit that made them.
//
// # Extended attributes
//
// user.*, trusted.* and security.* attributes are stored with the inode
// (security.capability is honoured: see FUSE_HANDLE_KILLPRIV_V2 above),
// except two kinds a mount answers EOPNOTSUPP for, get, set and remove
// alike, and leaves out of listxattr (xattrSupported, node.go):
//
//   - security.selinux. No label is there to give: on a machine running
//     SELinux the kernel labels a FUSE mount itself (genfs) and answers
//     for the attribute without asking the server, so only machines
//     without SELinux ever asked, for nothing. Copying a labelled file in
//     (measured: Debian 12) cp -a leaves the label out silently, tar
//     --xattrs warns and exits 0, as onto any filesystem without labels;
//     Docker layers carry security.capability only.
//   - system.posix_acl_access and system.posix_acl_default: POSIX ACLs
//     are not supported, as on a filesystem mounted noacl. The engine
//     never kept them (setting one has always been EOPNOTSUPP); reading
//     one now says so instead of "no such attribute".
//
// "Not supported" is the answer tools remember per filesystem: coreutils'
// ls -l (Debian 12's 9.1: file_has_acl_cache and getfilecon_cache in
// ls.c) remembers the st_dev that answered it for ACLs and for the label
// and stops asking, so a listing costs two GETXATTRs per process instead
// of two per file (a 50-file `ls -l`: 103 GETXATTRs before, 2 after;
// TestUnsupportedXattrs). "No such attribute" (ENODATA) is not cached by
// the kernel or by ls. The kernel itself remembers only ENOSYS, and then
// for every attribute of the connection, which would lose user.* too.
//
// The alternative for ACLs was the real thing, FUSE_POSIX_ACL: the kernel
// enforces ACLs and caches them per inode (Tuning.PosixACL, an
// experiment). It would cost one GETXATTR per file on a cold listing
// (run B in BENCHMARKS.md: the warm listing went from 2.02 to 1.28 per
// file, the rest being security.selinux and inodes the kernel evicted) and
// needs what the engine lacks: ACLs kept in system.* attributes, a new
// file's default ACL inherited from its directory, which the kernel leaves
// to the server (with FUSE_DONT_MASK, applying the umask itself where
// there is none), and the mode's group bits kept equal to the ACL's mask.
// Not supporting ACLs costs no request at all.
//
// # Passthrough
//
// Reads of a file whose whole content is in the engine's local data file
// skip the server: a read-only open of such a file (not inline, no block
// remote or still on a host base) gets the data file as its FUSE
// passthrough backing file, and the kernel reads it (page cache, O_DIRECT
// and mmap alike) as it reads a local file. The engine pins the data file
// from such an open until the kernel forgets the inode, not only until
// the handle's release, since a mapping outlives close(2) (the dynamic
// loader maps and closes) and the kernel forgets the inode only once the
// last mapping is gone (cache.Volume.PinLocal; passthrough.go's
// ioMode.held): eviction passes it over (a held inode's blocks stay in the
// cache until then), a growing truncate grows it, and a restore, discard or a read-only
// mount following its branch writes the new content into it in place
// (fetched before anything changes) instead of forgetting it, so an open
// reader reads the new bytes afterwards (during the change it may read a
// mix). The holds are bounded, so --cache-size still bounds the cache
// (cache/data's Cache.Pin): the pinned files take at most half of it,
// each counted at its size when pinned (or its cached bytes, if larger),
// and at most 1,024 files are pinned, each keeping one data-file
// descriptor in the server; a read-only open of a file whole locally that
// has no room is served without passthrough (the server reads it, as for
// a file not whole locally), and room comes back as the kernel forgets
// held inodes, not when they are closed: such an open asks the kernel to
// prune the held inodes no handle has open (FUSE_NOTIFY_PRUNE, FUSE
// protocol 7.45; passthrough.go's reclaim: one prune at a time, at most
// one a second unless a hold ended since the last), which it forgets
// unless still in use (a mapping keeps its inode, and so its pin). A
// kernel older than Linux 6.18 refuses the prune (go-fuse answers ENOSYS
// when the kernel announced a protocol before 7.45; a kernel that does not
// know the notify answers EINVAL): the mount logs it once and asks no
// more, pinned files are released only when the kernel forgets their
// inodes itself (memory pressure, drop_caches), and an open that finds no
// room is served without passthrough. Pinned bytes count in the cache's size but
// not in what triggers eviction, which keeps the other clean bytes within
// the size less the pinned ones: a reader never runs an eviction pass
// over files it cannot evict. The kernel allows one io mode per inode at a time, so the mode is
// decided per inode (passthrough.go): while a passthrough open is held,
// every open of the inode is passthrough, a writer too, with
// FOPEN_DIRECT_IO so that its reads and writes still reach the server
// (and a write drops the file's capabilities as on a direct-write mount);
// while a cached open is held, every open is cached. A passthrough
// writer's mmap maps the data file, so the engine adopts the data file
// (cache.Volume.AdoptPinned): at the writer's fsync and release; at every
// checkpoint, before it captures, from the writer's open until the kernel
// forgets the inode; and, after a passthrough writer, at the fsync or
// release of any handle of the inode and at its forget. An adoption makes
// dirty, with a new write generation, each block whose bytes in the data
// file differ from the record (a clean block's from its committed chunk,
// compared by the chunk's hash; a hole's from zeros), so the next
// checkpoint uploads what a shared mapping changed and nothing else, and
// an fsync of the writer makes it durable as any write. An adoption that
// finds the data file unchanged since the last one (its statx times,
// which a store through a mapping moves once the adoption wrote its pages
// back; trusted on ext2/3/4, XFS, Btrfs and F2FS) reads nothing; after a
// change, or on another filesystem, it reads and hashes the file's clean
// blocks under no lock of the engine: writes to that file, namespace
// changes and checkpoints go on meanwhile, and a block that changed
// through the server in the meantime is taken as changed (the engine
// rechecks each block's record before it marks: a write has made it dirty,
// or a checkpoint has recorded another chunk for it). What a shared
// writable mapping of a
// passthrough file can lose: msync alone reaches the data file, not the
// record; stores not yet adopted are in no checkpoint, not in the change
// feed, and move no mtime. A checkpoint includes what mappings stored
// before it began, also after every descriptor of the file was closed
// (the mapping keeps the inode, and its pin, until the kernel forgets
// it), and an unmount's final checkpoint includes everything. A crash of
// the server (kill -9) loses what mappings stored into blocks clean at
// their last adoption and not adopted since: at most the stores of one
// checkpoint interval (5s by default), and none that an fsync of the
// writer covered, nor, but for its last few milliseconds (the database's
// write-behind), an adoption: the restarted mount forgets its cached
// clean blocks and punches out of its data files every byte outside the
// dirty blocks its records list (cache.Volume's recovery), so it reads
// the committed bytes, also where a mapping stored into a hole. Lost as well: what a mapping that outlives the server stores
// after its crash, and, after a forced unmount (which detaches the mount
// while mappings live), what they store after its final checkpoint.
// Writes never pass through: dirty tracking, size, mtime, checkpoint
// capture and the change feed stay the server's. Passthrough needs a kernel that
// offers it (6.9 or later) and a server running as root (registering a
// backing file needs CAP_SYS_ADMIN); a mount asked for it that cannot
// have it says so in its log and serves reads itself. It is off unless
// asked for (`--tune passthrough=1`) until a quiet run of the benchmarks
// confirms it; measured in BENCHMARKS.md (issue 17). The POSIX suite runs
// with it on as well (TestPOSIXPassthrough, which under CI=true fails on
// a kernel without passthrough).
//
// Write passthrough (a writer's bytes going straight to the data file) is
// not done. It would need: dirty tracking from the backing file (which
// blocks a passthrough writer touched: the server sees no WRITE, so either
// every block of the file is taken as dirty at the writer's flush, fsync
// and release, or a comparison with the committed chunks decides), the
// size and mtime taken from the data file at those points and at every
// GETATTR while a writer is open (the kernel's cached size would otherwise
// be stale), checkpoint capture reading a consistent copy while the kernel
// keeps writing (a freeze that can stop a passthrough writer does not
// exist: the capture would copy, or reflink, the data file first), the
// write-before-record rule of the crash invariant (a block's dirty mark is
// in the database before its bytes land) replaced by adopting, after a
// crash, every block whose data-file bytes differ, the set-user-ID drop
// of unprivileged writes (KILLPRIV) and the change feed's "modified" at
// each close, all without a request per write.
//
// # Permissions, containers, locks
//
// Mounts use default_permissions (the kernel checks modes, owners and the
// sticky bit against the attributes the engine reports) and, when the
// server may, allow_other, so containers that bind-mount the mount work as
// any user. Its price: a create, unlink or rename invalidates the parent's
// attributes, and the kernel fetches them (one GETATTR) before the next
// permission check in that directory, so deleting a file costs two round
// trips where go-fuse's loopback, without default_permissions, pays one;
// the engine answers that GETATTR from memory (3 µs, BENCHMARKS.md run 5).
// Mounts are nodev and nosuid unless Options.Dev or Options.Suid (mount
// --dev, --suid) ask otherwise: a volume's files may come from anywhere
// (a shared store, a snapshot, a container's root), and a device node or a
// set-user-ID-root program among them would hand this machine's devices or
// root to whoever wrote it.
// flock(2), POSIX and OFD locks are left to the kernel (the
// server does not implement GETLK/SETLK): they work between all processes
// of this machine, containers included, which are the only ones that can
// see the mount.
//
// # Serving
//
// Mount serves a volume; Server.Unmount, Unmount and CleanStale detach
// mounts (busy ones fail with ErrBusy unless detached lazily), and
// ReadMountInfo/MountOf read the mount table without touching a mount, so
// a hung or dead server is detected instead of waited on. A process that
// serves a mount must not run commands in it: a fork whose working
// directory, executable or inherited files are on the mount can deadlock
// the server (go-fuse fs/api.go, "Deadlocks"); agentfs serves every mount
// from a process of its own.
//
// # File handles
//
// name_to_handle_at and open_by_handle_at work, and the mount can be
// re-exported over NFS: the mount negotiates FUSE_EXPORT_SUPPORT, a handle
// holds the inode number and a generation of the cache directory, and the
// engine resolves an inode number the kernel has forgotten ("." lookups,
// LookupNode) and a directory's parent (".." lookups, LookupParent); see
// export.go. A handle survives dropped kernel caches and remounts with the
// same cache directory; it is stale (ESTALE) once its file is removed,
// under a new cache directory, and for files a restore or discard
// replaced.
//
// # Free space
//
// Statfs reports the space of the filesystem that holds the cache
// directory (cache.Volume.StatFs): every write lands there first, so that
// is what can really be written. A fallocate that would grow a file by
// more than is free fails with ENOSPC, as on ext4; one that fits grows the
// file sparse and reserves nothing, unlike ext4.
//
// # Limits
//
// O_TMPFILE makes an unnamed inode in the engine (an orphan, like a file
// unlinked while open): linkat of its descriptor gives it a name, and
// otherwise it is gone at its last close or, after a crash of the server,
// at the next mount of the cache directory. fstat of a descriptor of a removed directory reports its last
// attributes with nlink 0, as ext4 does; a regular file unlinked while
// only an O_PATH descriptor refers to it is gone (ENOENT).
package fs
