package exec

// Shell scripts the docker backend runs in the container. They need only a
// POSIX sh, kill, a grep with -z (NUL-separated input: busybox's and GNU's
// have it), and /proc. They run as the commands' own user: reading another
// process's /proc/PID/environ needs the same uid (or CAP_SYS_PTRACE, which
// containers do not have), so root in the container could not find them.

// sweepFunc defines _afs_sweep TAG SELF [SESSION...]: it kills with SIGKILL
// every process (but SELF and pid 1) that carries AGENTFS_EXEC_ID=TAG in its
// environment or belongs to one of the sessions, adding the session of each
// tagged process to the set, and repeats until a scan finds nothing. It is
// the in-container twin of sweepHost (see proctree.go).
const sweepFunc = `_afs_sweep() {
	_t=$1 _m=$2
	shift 2
	_s=" $* "
	_i=0
	while [ "$_i" -lt 1000 ]; do
		_i=$((_i + 1))
		_k=
		_g=" "
		for _f in $(grep -lszxF -- "AGENTFS_EXEC_ID=$_t" /proc/[0-9]*/environ); do
			_p=${_f#/proc/}
			_g="$_g${_p%/environ} "
		done
		for _d in /proc/[0-9]*; do
			_p=${_d#/proc/}
			[ "$_p" = "$_m" ] || [ "$_p" = 1 ] && continue
			_l=
			{ read -r _l <"$_d/stat"; } 2>/dev/null || continue
			set -- ${_l##*") "}
			[ "$1" = Z ] && continue
			case "$_g" in
			*" $_p "*)
				if [ "$4" -gt 1 ]; then
					case "$_s" in *" $4 "*) ;; *) _s="$_s$4 " ;; esac
				fi
				kill -9 "$_p" 2>/dev/null && _k=1
				continue
				;;
			esac
			case "$_s" in *" $4 "*) kill -9 "$_p" 2>/dev/null && _k=1 ;; esac
		done
		[ -z "$_k" ] && return 0
	done
	echo "agentfs: processes of $_t keep appearing" >&2
	return 1
}
`

// insideFunc defines _afs_inside SCOPE TOP: it succeeds when the current
// directory is SCOPE or below it, and SCOPE is TOP or below it. It climbs
// from the current directory with cd -P .. in a subshell (so the caller's
// directory does not change), comparing each directory with [ -ef ], which
// stats "." itself: what it checks is the directory the shell is in, not a
// name that could be resolved again. TOP, the workspace's mount point, cannot
// be swapped by a rename; SCOPE is compared by name, so a scope directory
// replaced by a symlink during the climb can only make the check fail or,
// at worst, accept a directory that is still under TOP.
const insideFunc = `_afs_inside() (
	_in=
	_n=0
	while [ "$_n" -lt 4096 ]; do
		_n=$((_n + 1))
		[ . -ef "$1" ] && _in=1
		if [ . -ef "$2" ]; then
			[ -n "$_in" ]
			exit
		fi
		[ . -ef / ] && exit 1
		cd -P .. || exit 1
	done
	exit 1
)
`

// wrapperScript is the exec's main process. Its arguments are the command's
// directory, the backend's scope and the workspace's mount point, then the
// command. It enters the directory (cd -P), checks that the directory it
// is now in lies inside the scope (a concurrent rename may have swapped the
// checked directory for a symlink to anywhere), exits 126 with a message if
// not, and otherwise runs the command as its child (it is a session leader,
// made so by the engine), then kills whatever the command left running (its
// session and its tagged processes) and exits with the command's status.
const wrapperScript = sweepFunc + insideFunc + `_afs_dir=$1
cd -P -- "$_afs_dir" || exit 126
if ! _afs_inside "$2" "$3"; then
	echo "agentfs: the working directory $_afs_dir was replaced, while the command started, by a link out of $2; not run" >&2
	exit 126
fi
shift 3
"$@"
_afs_st=$?
_afs_tag=$AGENTFS_EXEC_ID
unset AGENTFS_EXEC_ID
_afs_sweep "$_afs_tag" $$ $$
exit $_afs_st
`

// killScript is run as root in a second exec to kill a command's tree: $1
// is the command's tag; the sessions are found from the tagged processes.
const killScript = sweepFunc + `_afs_sweep "$1" $$
`

// keepAliveScript is the container's main process: it sleeps until the
// container is removed.
const keepAliveScript = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`
