#!/usr/bin/env bash
# Tests the Python SDK (sdk/python): mypy --strict on the package, then
# pytest against a real `agentfs serve` built from this tree (the session
# fixture in sdk/python/tests/conftest.py builds and starts it); the
# examples run as part of the pytest suite. Installs Debian's python3-pytest
# and mypy when missing (scripts/setup-python.sh). scripts/test.sh calls it
# after the Go tests; `make test-python` runs it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

bash scripts/setup-python.sh
# Debian's pytest and mypy are installed for the system Python only.
PY=/usr/bin/python3

log "mypy --strict sdk/python/agentfs"
(cd sdk/python && mypy --strict --no-incremental agentfs examples)

log "pytest sdk/python"
(cd sdk/python && "$PY" -m pytest -q -p no:cacheprovider tests)
