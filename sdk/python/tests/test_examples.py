"""Every example in sdk/python/examples runs against the session's daemon and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SDK, Daemon

EXAMPLES = sorted((SDK / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example(daemon: Daemon, path: Path) -> None:
    env = dict(os.environ, AGENTFS_URL=daemon.url, AGENTFS_TOKEN=daemon.token, PYTHONPATH=str(SDK))
    r = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{path.name} failed:\n{r.stdout}\n{r.stderr}"
