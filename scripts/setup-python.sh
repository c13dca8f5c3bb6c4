#!/usr/bin/env bash
# Installs what the Python SDK's tests need (sdk/python): Debian's pytest,
# mypy, setuptools and pip, for /usr/bin/python3. Idempotent.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
apt_install python3-pytest mypy python3-setuptools python3-pip
