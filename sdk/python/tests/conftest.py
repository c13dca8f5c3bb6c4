"""The session's daemon: a real `agentfs serve` built from this repository, on a free
loopback port, with a temporary store, state directory and token. Nothing is mocked.

AGENTFS_TEST_BIN names a prebuilt agentfs binary to use instead of building one.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
SDK = HERE.parent
REPO = SDK.parent.parent
sys.path.insert(0, str(SDK))

import agentfs  # noqa: E402

TOKEN = "pysdk-test-admin-token"


class Daemon:
    def __init__(self, url: str, token: str, base: Path, proc: "subprocess.Popen[bytes]") -> None:
        self.url = url
        self.token = token
        self.base = base
        self.proc = proc

    def client(self, **kw: object) -> agentfs.Client:
        return agentfs.Client(self.url, self.token, **kw)  # type: ignore[arg-type]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    base = Path(tempfile.mkdtemp(prefix="agentfs-pysdk-"))
    binary = os.environ.get("AGENTFS_TEST_BIN")
    if not binary:
        binary = str(base / "agentfs")
        subprocess.run(["go", "build", "-o", binary, "./cmd/agentfs"], cwd=REPO, check=True)
    (base / "token").write_text(TOKEN)
    env = dict(os.environ)
    env.update({"XDG_DATA_HOME": str(base / "data"), "XDG_CACHE_HOME": str(base / "cache"),
                "XDG_STATE_HOME": str(base / "xdg-state")})
    env.pop("AGENTFS_TOKEN", None)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(base / "serve.log", "wb")
    proc = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--state-dir", str(base / "state"),
                             "--token-file", str(base / "token"), "--log-level", "warn"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"agentfs serve did not start; its log:\n{(base / 'serve.log').read_text()}")
        time.sleep(0.05)
    d = Daemon(url, TOKEN, base, proc)
    try:
        yield d
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = -9
        log.close()
        if rc != 0:
            sys.stderr.write(f"agentfs serve exited {rc}; its log:\n{(base / 'serve.log').read_text()}\n")
        shutil.rmtree(base, ignore_errors=True)
        assert rc == 0, f"agentfs serve exited {rc} on SIGTERM"


@pytest.fixture(scope="session")
def client(daemon: Daemon) -> Iterator[agentfs.Client]:
    with daemon.client() as c:
        yield c


_names = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.fixture
def ws(client: agentfs.Client, request: pytest.FixtureRequest) -> Iterator[agentfs.Workspace]:
    w = client.create_workspace(unique("t"))
    yield w
    client.delete_workspace(w.name, missing_ok=True)
