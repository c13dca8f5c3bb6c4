#!/usr/bin/env bash
# Installs a Docker engine, starts dockerd if no daemon answers, and imports
# the local test image (no registry is reachable). Idempotent.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
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
