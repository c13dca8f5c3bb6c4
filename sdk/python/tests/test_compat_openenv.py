"""agentfs.compat.openenv: shape against the seed, behaviour against the daemon."""

from __future__ import annotations

import time

import pytest

import agentfs
from agentfs.compat import openenv as oe
from seeds import OPENENV, OPENENV_DATA
from shape import check_class, check_fields


def test_shape() -> None:
    check_class(oe.BgJob, OPENENV["BgJob"])
    check_class(oe.AgentFSBgJob, OPENENV["BgJob"])
    check_class(oe.SandboxHandle, OPENENV["SandboxHandle"])
    check_class(oe.AgentFSSandbox, OPENENV["SandboxHandle"])
    check_class(oe.SandboxBackend, OPENENV["SandboxBackend"])
    check_class(oe.AgentFSSandboxBackend, OPENENV["SandboxBackend"])
    for name, fields in OPENENV_DATA.items():
        check_fields(getattr(oe, name), fields)


def test_sandbox(client: agentfs.Client) -> None:
    backend = oe.AgentFSSandboxBackend(client)
    assert isinstance(backend, oe.SandboxBackend)
    sb = backend.create(envs={"GREETING": "hi"}, metadata={"run": "test"})
    assert isinstance(sb, oe.SandboxHandle)
    try:
        info = client.get_workspace(sb.sandbox_id)
        assert info.metadata == {"run": "test"} and info.expires_at is not None and info.delete_on_expiry
        r = sb.exec("echo $GREETING $OTHER; echo e >&2; exit 1", envs={"OTHER": "there"})
        assert r == oe.ExecResult(exit_code=1, stdout="hi there\n", stderr="e\n")
        sb.write_text("sub/dir/f.txt", "text ✓")
        assert sb.read_text("sub/dir/f.txt") == "text ✓"
        assert sb.exists("sub/dir/f.txt") and not sb.exists("nope")
        assert sb.exec("pwd", cwd="sub").stdout.rstrip().endswith("/sub")
        assert sb.exec("sleep 5", timeout=0.5).exit_code == 137
        job = sb.start_bg("sleep 0.3; echo bg > bg.txt; exit 5")
        assert isinstance(job, oe.BgJob) and job.pid >= 1
        assert job.wait(timeout=30) == 5
        assert sb.read_text("bg.txt") == "bg\n"
        slow = sb.start_bg("sleep 60")
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            slow.wait(timeout=0.5)
        assert time.monotonic() - t0 < 10
        slow.kill()
        assert slow.wait(timeout=10) != 0
        with pytest.raises(agentfs.PathEscape):
            sb.read_text("../x")
    finally:
        sb.kill()
    with pytest.raises(agentfs.NotFound):
        client.get_workspace(sb.sandbox_id)
    sb.kill()  # twice is fine


def test_lifetime_honoured(client: agentfs.Client) -> None:
    sb = oe.AgentFSSandboxBackend(client).create(timeout_s=2)
    job = sb.start_bg("sleep 60")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            client.get_workspace(sb.sandbox_id)
        except agentfs.NotFound:
            break
        time.sleep(0.25)
    else:
        raise AssertionError("the sandbox outlived its timeout_s by a minute")
    del job
