"""`pip install ./sdk/python` works without a package index (setuptools build backend),
and installs the typed package with its adapters."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import SDK


def test_pip_install_offline() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="agentfs-pip-"))
    try:
        src = tmp / "src"
        shutil.copytree(SDK, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", ".*cache"))
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation",
                        "--target", str(tmp / "site"), str(src)], check=True, env=env, capture_output=True)
        site = tmp / "site"
        assert (site / "agentfs" / "py.typed").exists()
        out = subprocess.run([sys.executable, "-c", "import agentfs, agentfs.compat.omniagents, agentfs.compat.openenv, "
                              "agentfs.compat.pydantic_deep, agentfs.compat.agent_backend; print(agentfs.__file__)"],
                             env=dict(os.environ, PYTHONPATH=str(site)), cwd=tmp, check=True, capture_output=True,
                             text=True).stdout
        assert out.strip().startswith(str(site))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
