"""agentfs.compat.agent_backend: shape against the seed, behaviour against the daemon."""

from __future__ import annotations

import asyncio
import inspect
import io
import tarfile
from contextlib import redirect_stdout
from typing import List

import pytest

import agentfs
from agentfs.compat import agent_backend as ab
from conftest import Daemon, unique
from seeds import (
    AGENT_BACKEND_ASYNC, AGENT_BACKEND_DATA, AGENT_BACKEND_ENUMS, AGENT_BACKEND_ERRORS, AGENT_BACKEND_METHODS,
)
from shape import check_fields


def test_shape() -> None:
    for m in AGENT_BACKEND_METHODS:
        assert callable(getattr(ab.AgentFSBackend, m)), m
    for m in AGENT_BACKEND_ASYNC:
        assert inspect.iscoroutinefunction(getattr(ab.AgentFSBackend, m)), f"{m} must be async"
    assert not inspect.iscoroutinefunction(ab.AgentFSBackend.scope)
    for name, fields in AGENT_BACKEND_DATA.items():
        check_fields(getattr(ab, name), fields)
    assert ab.ExecOptions().encoding == "utf8" and ab.ReadOptions().encoding == "utf8"
    for name in AGENT_BACKEND_ERRORS:
        assert issubclass(getattr(ab, name), ab.BackendError)
    e = ab.DangerousOperationError("x", "policy_refused", "exec")
    assert e.operation == "exec" and e.code == "policy_refused"
    for name, members in AGENT_BACKEND_ENUMS.items():
        assert {m.name: m.value for m in getattr(ab, name)} == members
    assert list(inspect.signature(ab.AgentFSBackend.scope).parameters)[:3] == ["self", "path", "config"]


class Recorder:
    def __init__(self) -> None:
        self.entries: List[ab.OperationLog] = []

    def log(self, entry: ab.OperationLog) -> None:
        self.entries.append(entry)


def test_backend(daemon: Daemon) -> None:
    name = unique("ab")

    async def main() -> None:
        backend = ab.AgentFSBackend(ab.AgentFSBackendConfig(workspace=name, host=daemon.url,
                                                            auth_token=daemon.token, env={"BASE": "b"}))
        rec = Recorder()
        scoped = backend.scope("projects/my-app", ab.ScopeConfig(env={"PYTHONPATH": "/lib"}, operations_logger=rec))
        await scoped.write("script.py", "import os; print(os.environ['PYTHONPATH'], os.environ['BASE'])")
        assert await scoped.exec("python3 script.py") == "/lib b\n"
        assert await scoped.exec("echo $X", ab.ExecOptions(env={"X": "y"})) == "y\n"
        assert await backend.exists("projects/my-app/script.py")
        assert await scoped.read("script.py") == await backend.read("projects/my-app/script.py")
        await scoped.write("logo.png", b"\x89PNG\x00\xff")
        assert await scoped.read("logo.png", ab.ReadOptions(encoding="buffer")) == b"\x89PNG\x00\xff"
        tarball = await scoped.exec("tar -czf - .", ab.ExecOptions(encoding="buffer"))
        assert isinstance(tarball, bytes)
        with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tf:
            assert sorted(n.lstrip("./") for n in tf.getnames() if n not in (".", "./")) == ["logo.png", "script.py"]
        await scoped.mkdir("a/b")
        await scoped.touch("a/b/t.txt")
        await scoped.touch("a/b/t.txt")
        assert await scoped.read("a/b/t.txt") == ""
        assert sorted(await scoped.readdir(".")) == ["a", "logo.png", "script.py"]
        await scoped.rename("a/b/t.txt", "a/t2.txt")
        st = await scoped.stat("a/t2.txt")
        assert st.is_file and not st.is_directory and st.size == 0
        assert (await scoped.stat("a")).is_directory
        with pytest.raises(ab.BackendError) as ei:
            await scoped.rm("a")
        assert ei.value.code == "not_empty"
        await scoped.rm("a", ab.RmOptions(recursive=True))
        await scoped.rm("nothing", ab.RmOptions(force=True))
        assert not await scoped.exists("a")
        with pytest.raises(ab.PathEscapeError):
            await scoped.read("../../../etc/passwd")
        with pytest.raises(ab.PathEscapeError):
            await scoped.write("/etc/passwd", "x")
        with pytest.raises(ab.ExecError) as ee:
            await scoped.exec("echo o; echo e >&2; exit 7")
        assert ee.value.code == "EXEC_FAILED" and ee.value.exit_code == 7 and ee.value.stdout == "o\n"
        with pytest.raises(ab.BackendError) as et:
            await scoped.exec("sleep 5", ab.ExecOptions(timeout_ms=300))
        assert et.value.code == "EXEC_TIMEOUT"
        with pytest.raises(ab.BackendError) as en:
            await scoped.read("missing")
        assert en.value.code == "not_found"
        ops = [e.operation for e in rec.entries]
        assert ops[:3] == ["write", "exec", "exec"] and all(e.duration_ms >= 0 for e in rec.entries)
        assert not rec.entries[-1].success
        # the console logger prints "[AgentBackend] exec: COMMAND"
        out = io.StringIO()
        with redirect_stdout(out):
            await backend.scope("p2", operations_logger=ab.ConsoleOperationsLogger()).exec("true")
        assert out.getvalue() == "[AgentBackend] exec: true\n"
        # nested scopes and concurrency
        users = [scoped.scope(f"users/u{i}") for i in range(6)]
        await asyncio.gather(*(u.write("id.txt", str(i)) for i, u in enumerate(users)))
        assert await asyncio.gather(*(u.exec("cat id.txt") for u in users)) == [str(i) for i in range(6)]

        class Closeable:
            closed = False

            async def aclose(self) -> None:
                Closeable.closed = True

        users[0].track_closeable(Closeable())
        await backend.destroy()
        assert Closeable.closed
        with pytest.raises(ab.BackendError):
            await backend.exists("x")

    asyncio.run(main())
    with agentfs.Client(daemon.url, daemon.token) as c:
        c.delete_workspace(name)
