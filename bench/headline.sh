#!/usr/bin/env bash
# Reproduces the headline table of BENCHMARKS.md: `agentfs bench` over the
# same workloads in
#
#   loopback       go-fuse's loopback filesystem over a directory on the same
#                  disk (`agentfs loopback`, served by a separate process):
#                  the baseline every agentfs performance target is a ratio to
#   plain          a plain directory on the local disk
#   agentfs-file   an agentfs mount (`agentfs mount -d`) whose store is
#                  file:// on the same disk
#   agentfs-minio  an agentfs mount whose store is s3:// on a MinIO server
#                  this script starts on a free loopback port (data on the
#                  same disk; binary from scripts/setup-minio.sh, or
#                  $AGENTFS_MINIO) and stops at exit
#
# Usage: bench/headline.sh [--quick] [TARGET...]
#        (default: loopback plain agentfs-file agentfs-minio)
#
# The first target is the reference of the ×[1] column. Every agentfs mount
# gets a fresh volume and cache directory; everything is unmounted (agentfs
# umount: synced first) and removed at exit, also on failure or Ctrl-C.
# Results go to bench/results/ (git-ignored): headline.txt (the table),
# headline.json, headline.svg. Work directories live under $AGENTFS_BENCH_DIR (default
# /var/tmp/agentfs-bench), which must be on the local disk, not tmpfs. Run as
# root so that reads can be made cold with drop_caches, and with fuse3
# installed (scripts/setup-fuse.sh). Extra `agentfs bench` flags can be given
# in $AGENTFS_BENCH_FLAGS (for example "--repeats 5").
#
# Targets that cannot run on this checkout are skipped with the reason
# printed, never faked.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
targets=()
for a in "$@"; do
	case $a in
	--quick) quick=(--quick) ;;
	plain | loopback | agentfs-file | agentfs-minio) targets+=("$a") ;;
	-h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "headline.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
	esac
done
[ ${#targets[@]} -gt 0 ] || targets=(loopback plain agentfs-file agentfs-minio)

out=bench/results
base=${AGENTFS_BENCH_DIR:-/var/tmp/agentfs-bench}
tools=${AGENTFS_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/agentfs/tools}
minio_bin=${AGENTFS_MINIO:-$tools/minio}

log() { printf '[headline] %s\n' "$*" >&2; }

# A mount left under $base by an earlier, killed run must not be emptied
# through by rm -rf: refuse instead.
if awk -v b="$base/" 'index($5, b) == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
	log "something is still mounted under $base: unmount it first (agentfs umount --force, fusermount3 -u)"
	exit 1
fi
mkdir -p "$out"
rm -rf "$base"
mkdir -p "$base"
agentfs="$base/agentfs"
go build -o "$agentfs" ./cmd/agentfs

pids=()         # loopback servers
mounts=()       # every FUSE mount point this script made
agentfs_mnts=() # the agentfs ones, unmounted (and synced) with agentfs umount
minio_pid=
cleanup() {
	local m p
	for m in "${agentfs_mnts[@]}"; do
		timeout 300 "$agentfs" umount "$m" >/dev/null 2>&1 ||
			timeout 60 "$agentfs" umount --force "$m" >/dev/null 2>&1 || true
	done
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for m in "${mounts[@]}"; do
		if awk -v m="$m" '$5 == m {found=1} END {exit !found}' /proc/self/mountinfo; then fusermount3 -u -z "$m" || true; fi
	done
	if [ -n "$minio_pid" ]; then
		kill -TERM "$minio_pid" 2>/dev/null || true
		wait "$minio_pid" 2>/dev/null || true
	fi
	# Never remove through a mount that refused to go away.
	if awk -v b="$base/" 'index($5, b) == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
		log "left $base in place: something under it is still mounted"
	else
		rm -rf "$base"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_mounted MNT PID: waits until MNT is a FUSE mount point, or fails if
# the server PID exits first or 20 s pass.
wait_mounted() {
	for _ in $(seq 200); do
		if awk -v m="$1" '$5 == m && $0 ~ / - fuse/ {found=1} END {exit !found}' /proc/self/mountinfo; then
			return 0
		fi
		kill -0 "$2" 2>/dev/null || { log "the server for $1 exited before mounting"; return 1; }
		sleep 0.1
	done
	log "$1 not mounted after 20s"
	return 1
}

# has_mount_command: whether this agentfs has the `mount` subcommand.
has_mount_command() { "$agentfs" mount --help >/dev/null 2>&1; }

# start_minio: serves a MinIO (the binary of scripts/setup-minio.sh) on a
# free loopback port with random credentials and data in $base/minio, makes
# the bucket agentfs-bench and sets minio_url to an s3:// URL for it (the
# credentials travel in the URL, which agentfs never prints). The server is
# stopped by cleanup.
minio_url=
start_minio() {
	local user pass port try
	user=bench$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
	pass=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	mkdir -p "$base/minio"
	for try in 1 2 3; do
		# A random high port that nothing listens on; MinIO failing to bind
		# it anyway (a race) is retried.
		port=$((20000 + RANDOM % 30000))
		if ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then continue; fi
		MINIO_ROOT_USER=$user MINIO_ROOT_PASSWORD=$pass MINIO_BROWSER=off MINIO_UPDATE=off MINIO_CONFIG_ENV_FILE= \
			"$minio_bin" server --quiet --address "127.0.0.1:$port" "$base/minio/data" >"$base/minio.log" 2>&1 &
		minio_pid=$!
		for _ in $(seq 300); do
			if curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$port/minio/health/ready"; then
				timeout 30 curl -fsS -o /dev/null --aws-sigv4 "aws:amz:us-east-1:s3" --user "$user:$pass" \
					-X PUT "http://127.0.0.1:$port/agentfs-bench" || { log "cannot create the bucket on MinIO"; return 1; }
				minio_url="s3://$user:$pass@agentfs-bench/headline?endpoint=http%3A%2F%2F127.0.0.1%3A$port&path_style=true&region=us-east-1"
				log "MinIO on 127.0.0.1:$port (try $try), data in $base/minio"
				return 0
			fi
			kill -0 "$minio_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -TERM "$minio_pid" 2>/dev/null || true
		wait "$minio_pid" 2>/dev/null || true
		minio_pid=
	done
	log "MinIO did not start:"
	cat "$base/minio.log" >&2
	return 1
}

# start_agentfs_mount NAME URL: initializes a volume on URL and mounts it
# with `agentfs mount -d` on $base/NAME (cache in $base/NAME-cache, on the
# same disk), recording it for clean-up. -d returns once the mount serves.
start_agentfs_mount() {
	local name=$1 url=$2 mnt=$base/$1 out
	if ! out=$(timeout 120 "$agentfs" init "$url" 2>&1); then
		log "agentfs init for $name failed: $out"
		return 1
	fi
	mounts+=("$mnt")
	agentfs_mnts+=("$mnt")
	if ! out=$(timeout 120 "$agentfs" mount -d --cache-dir "$base/$name-cache" "$url" "$mnt" 2>&1); then
		log "agentfs mount for $name failed: $out"
		cat "$base/$name-cache/mount.log" >&2 2>/dev/null || true
		return 1
	fi
	log "$name: ${out#agentfs: }"
}

dirs=()
skipped=()
for t in "${targets[@]}"; do
	case $t in
	plain)
		mkdir -p "$base/plain"
		dirs+=("$base/plain")
		;;
	loopback)
		mkdir -p "$base/loopback-src" "$base/loopback"
		"$agentfs" loopback "$base/loopback-src" "$base/loopback" 2>"$base/loopback.log" &
		pids+=($!)
		mounts+=("$base/loopback")
		wait_mounted "$base/loopback" "$!" || { cat "$base/loopback.log" >&2; exit 1; }
		dirs+=("$base/loopback")
		;;
	agentfs-file)
		if ! has_mount_command; then
			skipped+=("$t: \`agentfs mount\` is not available in this build")
			continue
		fi
		start_agentfs_mount "$t" "file://$base/store" || exit 1
		dirs+=("$base/$t")
		;;
	agentfs-minio)
		if ! has_mount_command; then
			skipped+=("$t: \`agentfs mount\` is not available in this build")
			continue
		fi
		if [ ! -x "$minio_bin" ]; then
			skipped+=("$t: MinIO is not installed (bash scripts/setup-minio.sh)")
			continue
		fi
		start_minio || exit 1
		start_agentfs_mount "$t" "$minio_url" || exit 1
		dirs+=("$base/$t")
		;;
	esac
done
[ ${#dirs[@]} -gt 0 ] || { log "no target could run"; printf '  skipped %s\n' "${skipped[@]}" >&2; exit 1; }

# shellcheck disable=SC2206 # AGENTFS_BENCH_FLAGS is split into words on purpose
cmd=("$agentfs" bench "${quick[@]}" ${AGENTFS_BENCH_FLAGS:-} --json-out "$out/headline.json" --svg "$out/headline.svg" "${dirs[@]}")
log "running: agentfs bench ${quick[*]} ${AGENTFS_BENCH_FLAGS:-} --json-out $out/headline.json --svg $out/headline.svg ${dirs[*]}"
"${cmd[@]}" | tee "$out/headline.txt"
if [ ${#skipped[@]} -gt 0 ]; then
	{
		echo
		echo "skipped targets:"
		printf '  %s\n' "${skipped[@]}"
	} | tee -a "$out/headline.txt"
fi
log "table: $out/headline.txt, report: $out/headline.json, chart: $out/headline.svg"
