#!/usr/bin/env bash
# Reproduces the headline table of BENCHMARKS.md: `agentfs bench` over the
# same workloads in
#
#   plain          a plain directory on the local disk
#   loopback       go-fuse's loopback filesystem over a directory on the same
#                  disk (`agentfs loopback`, served by a separate process):
#                  the baseline every agentfs performance target is a ratio to
#   agentfs-file   an agentfs mount whose store is file:// on the same disk
#   agentfs-minio  an agentfs mount whose store is a local MinIO (s3://)
#
# Usage: bench/headline.sh [--quick] [TARGET...]      (default: all four)
#
# The first target is the reference of the ×[1] column. Results go to
# bench/results/ (git-ignored): headline.txt (the table), headline.json,
# headline.svg. Work directories live under $AGENTFS_BENCH_DIR (default
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
	-h | --help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "headline.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
	esac
done
[ ${#targets[@]} -gt 0 ] || targets=(plain loopback agentfs-file agentfs-minio)

out=bench/results
base=${AGENTFS_BENCH_DIR:-/var/tmp/agentfs-bench}
mkdir -p "$out"
rm -rf "$base"
mkdir -p "$base"
agentfs="$base/agentfs"
go build -o "$agentfs" ./cmd/agentfs

log() { printf '[headline] %s\n' "$*" >&2; }

pids=()
mounts=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for m in "${mounts[@]}"; do
		if grep -q " $m fuse" /proc/self/mountinfo; then fusermount3 -u -z "$m" || true; fi
	done
	rm -rf "$base"
}
trap cleanup EXIT

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

# has_mount_command: whether this agentfs has the `mount` subcommand yet.
has_mount_command() { "$agentfs" mount --help >/dev/null 2>&1; }

# start_agentfs_mount URL MNT: mounts an agentfs volume on URL at MNT in a
# separate process and records it for clean-up. This is the place where the
# agentfs-file and agentfs-minio targets are wired in once `agentfs mount`
# exists; until its flags are settled it refuses rather than guesses.
start_agentfs_mount() {
	log "agentfs mount exists now: wire it into start_agentfs_mount in bench/headline.sh (init $1, mount it on $2, wait_mounted)"
	return 1
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
	agentfs-file | agentfs-minio)
		if ! has_mount_command; then
			skipped+=("$t: \`agentfs mount\` is not available in this build yet")
			continue
		fi
		if [ "$t" = agentfs-minio ] && [ ! -x "${AGENTFS_TOOLS:-$HOME/.cache/agentfs/tools}/minio" ]; then
			skipped+=("$t: MinIO is not installed (bash scripts/setup-minio.sh)")
			continue
		fi
		url="file://$base/store"
		[ "$t" = agentfs-minio ] && url="s3://agentfs-bench/headline"
		mkdir -p "$base/$t"
		start_agentfs_mount "$url" "$base/$t" || exit 1
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
