# shellcheck shell=bash
# Common settings for the set-up scripts. Source it; do not run it.

# Where built tools (minio, golangci-lint) are cached so they build once per machine.
: "${AGENTFS_TOOLS:=${XDG_CACHE_HOME:-$HOME/.cache}/agentfs/tools}"
export AGENTFS_TOOLS
mkdir -p "$AGENTFS_TOOLS"
export PATH="$AGENTFS_TOOLS:$PATH"

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

# apt_install PKG... installs Debian packages that are missing, running
# apt-get update at most once per process tree.
apt_install() {
	local missing=()
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} by hand"
	if [ -z "${AGENTFS_APT_UPDATED:-}" ]; then
		log "apt-get update"
		apt-get update -qq >/dev/null || die "apt-get update failed"
		export AGENTFS_APT_UPDATED=1
	fi
	log "apt-get install ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null || die "apt-get install ${missing[*]} failed"
}

# go_tool NAME MODULE@VERSION builds a Go tool into $AGENTFS_TOOLS once.
# A stamp file records the version so a pin change rebuilds it.
go_tool() {
	local name=$1 mod=$2 stamp="$AGENTFS_TOOLS/.$1.version"
	if [ -x "$AGENTFS_TOOLS/$name" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$mod" ]; then
		return 0
	fi
	log "building $mod (once; cached in $AGENTFS_TOOLS)"
	(cd / && GOBIN="$AGENTFS_TOOLS" GOFLAGS= go install "$mod") || die "go install $mod failed"
	echo "$mod" >"$stamp"
}
