"""Connection reuse and retries against a daemon that restarts: the pool's kept-alive
connections die with it, and the next idempotent call succeeds on a fresh connection."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import agentfs
from conftest import Daemon, _free_port


def _start(daemon: Daemon, port: int, state: Path) -> "subprocess.Popen[bytes]":
    binary = os.environ.get("AGENTFS_TEST_BIN") or str(daemon.base / "agentfs")
    env = dict(os.environ, XDG_DATA_HOME=str(state / "data"), XDG_CACHE_HOME=str(state / "cache"))
    env.pop("AGENTFS_TOKEN", None)
    p = subprocess.Popen([binary, "serve", "--listen", f"127.0.0.1:{port}", "--state-dir", str(state / "state"),
                          "--token-file", str(daemon.base / "token"), "--log-level", "error"], env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("agentfs serve did not start")


def _stop(p: "subprocess.Popen[bytes]") -> None:
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=120) == 0


def test_retry_after_restart(daemon: Daemon, tmp_path: Path) -> None:
    port = _free_port()
    p = _start(daemon, port, tmp_path)
    try:
        with agentfs.Client(f"http://127.0.0.1:{port}", daemon.token, pool_size=4) as c:
            ws = c.create_workspace("retry")
            ws.write("f.txt", "kept")
            assert len(c.transport._idle) >= 1
            _stop(p)
            # the daemon is gone: a call fails with ConnectionFailed, after its retries
            with pytest.raises(agentfs.ConnectionFailed):
                ws.read_text("f.txt")
            p = _start(daemon, port, tmp_path)
            # a fresh pool entry: idempotent calls go through
            ws.write("g.txt", "again")
            assert ws.read_text("f.txt") == "kept"
            conns = list(c.transport._idle)
            _stop(p)
            p = _start(daemon, port, tmp_path)
            # the pooled connections were closed by the old daemon: they are not used, so
            # even a command (not repeated on a broken connection) goes through at once
            assert conns and c.transport._idle
            assert ws.exec("cat g.txt").stdout == "again"
            assert ws.read_text("g.txt") == "again"
            assert ws.glob("*.txt") == ["f.txt", "g.txt"]
            ws.write("h.txt", "h")
            c.delete_workspace("retry")
    finally:
        if p.poll() is None:
            _stop(p)
