#!/usr/bin/env bash
# Installs fuse3 (fusermount3) and checks /dev/fuse. Idempotent.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
apt_install fuse3
[ -c /dev/fuse ] || die "/dev/fuse is missing: this machine cannot serve FUSE mounts"
grep -q '^user_allow_other' /etc/fuse.conf 2>/dev/null || echo user_allow_other >>/etc/fuse.conf
log "fuse3 ready ($(fusermount3 -V 2>&1))"
