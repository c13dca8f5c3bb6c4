#!/usr/bin/env bash
# Installs a Docker engine, starts dockerd if no daemon answers, and imports
# the local test image (no registry is reachable). Idempotent.
#
# The test image, agentfs-test/busybox:1, is a root filesystem built from the
# busybox-static package: /bin/busybox and its applet symlinks (sh, sleep, ps,
# kill, setsid, cat, ls, grep, tr, ...), /tmp (1777), /workspace, and an
# /etc/passwd with root and an unprivileged user agent (1000:1000). exec/
# tests find it by that name. Changing what goes into the image means bumping
# the tag here and in exec/ (AGENTFS_TEST_IMAGE overrides it for tests).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

: "${AGENTFS_TEST_IMAGE:=agentfs-test/busybox:1}"

apt_install docker.io busybox-static
if ! docker info >/dev/null 2>&1; then
	log "starting dockerd"
	mkdir -p /var/log
	nohup dockerd >/var/log/agentfs-dockerd.log 2>&1 &
	for _ in $(seq 1 60); do
		docker info >/dev/null 2>&1 && break
		sleep 1
	done
	docker info >/dev/null 2>&1 || die "dockerd did not start; see /var/log/agentfs-dockerd.log"
fi
log "docker engine ready"

if docker image inspect "$AGENTFS_TEST_IMAGE" >/dev/null 2>&1; then
	log "test image $AGENTFS_TEST_IMAGE present"
	exit 0
fi

bb=$(command -v busybox || true)
[ -n "$bb" ] || bb=/bin/busybox
[ -x "$bb" ] || die "busybox (package busybox-static) not found"
file_out=$(LC_ALL=C ldd "$bb" 2>&1 || true)
case "$file_out" in
*"not a dynamic executable"* | *"statically linked"*) ;;
*) die "$bb is not statically linked (install busybox-static): $file_out" ;;
esac

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,workspace,root,home/agent,proc,sys,dev}
chmod 1777 "$root/tmp"
cp "$bb" "$root/bin/busybox"
# One symlink per applet, at the path busybox itself lists (bin/sh, usr/bin/...).
"$bb" --list-full | while read -r applet; do
	[ "$applet" = bin/busybox ] && continue
	ln -sf /bin/busybox "$root/$applet"
done
cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
agent:x:1000:1000:agent:/home/agent:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
agent:x:1000:
nogroup:x:65534:
GROUP
chown 1000:1000 "$root/home/agent"

log "importing $AGENTFS_TEST_IMAGE from busybox $("$bb" | head -1 | awk '{print $2}')"
tar --numeric-owner -C "$root" -c . |
	docker import \
		--change 'CMD ["/bin/sh"]' \
		--change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'LABEL org.agentfs.test-image=1' \
		- "$AGENTFS_TEST_IMAGE" >/dev/null
docker image inspect "$AGENTFS_TEST_IMAGE" >/dev/null 2>&1 || die "docker import of $AGENTFS_TEST_IMAGE failed"
log "test image $AGENTFS_TEST_IMAGE imported"
