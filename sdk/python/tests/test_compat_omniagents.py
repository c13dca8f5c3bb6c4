"""agentfs.compat.omniagents: shape against the seed, behaviour against the daemon."""

from __future__ import annotations

import agentfs
from agentfs.compat import omniagents as om
from conftest import unique
from seeds import OMNIAGENTS, OMNIAGENTS_DATA, OMNIAGENTS_ENUMS
from shape import check_class, check_fields


def test_shape() -> None:
    for cls in (om.ExecutionBackend, om.AgentFSBackend):
        check_class(cls, OMNIAGENTS["ExecutionBackend"])
    for cls in (om.StateManager, om.NoOpStateManager, om.AgentFSStateManager):
        check_class(cls, OMNIAGENTS["StateManager"])
    for name, members in OMNIAGENTS_ENUMS.items():
        assert [m.name for m in getattr(om, name)] == members
    for name, fields in OMNIAGENTS_DATA.items():
        check_fields(getattr(om, name), fields)
    assert issubclass(om.AgentFSBackend, om.ExecutionBackend)
    assert issubclass(om.AgentFSStateManager, om.StateManager)
    # constructor: project_id and state_manager, as every omniagents backend
    b = om.AgentFSBackend(project_id="x", state_manager=om.NoOpStateManager(), client=agentfs.Client("http://h:1", "t"))
    assert b.project_id == "x" and b.status is om.BackendStatus.UNINITIALIZED


def test_backend(client: agentfs.Client) -> None:
    pid = unique("omni")
    b = om.AgentFSBackend(project_id=pid, state_manager=om.NoOpStateManager(), client=client)
    assert b.get_status() is om.BackendStatus.UNINITIALIZED
    b.start()
    try:
        assert b.status is om.BackendStatus.RUNNING
        r = b.execute_command("echo 'Hello'")
        assert r.output == "Hello\n" and r.exit_code == 0
        r = b.execute_command("echo out; echo err >&2; exit 2")
        assert sorted(r.output.split()) == ["err", "out"] and r.exit_code == 2
        assert b.execute_command("[[ 1 == 1 ]] && echo bash").output == "bash\n"
        r = b.execute_command("sleep 5", timeout=1)
        assert r.exit_code == 137
        cwd = b.get_working_directory()
        assert cwd.startswith("/")
        b.write_file("hello.py", "print('hello')")
        assert b.read_file("hello.py") == "print('hello')"
        assert b.read_file(cwd + "/hello.py") == "print('hello')"
        assert b.execute_command("python3 hello.py").output == "hello\n"
        assert b.file_exists("hello.py") is om.FileType.FILE
        assert b.file_exists("nope") is None
        b.copy_file("hello.py", "src.py")
        b.move_file("src.py", "dst.py")
        assert b.file_exists("src.py") is None and b.read_file("dst.py") == "print('hello')"
        b.delete_file("dst.py")
        assert b.file_exists("dst.py") is None
        b.create_directory("src/utils", parents=True)
        assert b.file_exists("src/utils") is om.FileType.DIRECTORY
        b.write_file("src/utils/a.py", "")
        b.execute_command("ln -s hello.py link.py")
        assert b.file_exists("link.py") is om.FileType.SYMLINK
        top = b.list_directory(cwd)
        assert {(f.name, f.type) for f in top} >= {("hello.py", om.FileType.FILE), ("src", om.FileType.DIRECTORY)}
        assert all(f.path.startswith(cwd + "/") for f in top)
        rec = b.list_directory("src", recursive=True)
        assert [f.path for f in rec] == [cwd + "/src/utils", cwd + "/src/utils/a.py"]
        assert b.glob_files("**/*.py") == ["hello.py", "link.py", "src/utils/a.py"]
        assert b.glob_files("*.py", path="src/utils") == ["src/utils/a.py"]
        b.delete_directory("src")
        assert b.file_exists("src") is None
        try:
            b.read_file("../outside")
            raise AssertionError("path escape not refused")
        except agentfs.PathEscape:
            pass
        try:
            b.read_file("/etc/passwd")
            raise AssertionError("path escape not refused")
        except agentfs.PathEscape:
            pass
        try:
            b.read_file("missing")
            raise AssertionError("missing file not refused")
        except agentfs.NotFound:
            pass
    finally:
        b.shutdown()
        assert b.status is om.BackendStatus.STOPPED
    # the workspace persists: a new backend on the same project sees the files
    b2 = om.AgentFSBackend(project_id=pid, state_manager=om.NoOpStateManager(), client=client)
    b2.start()
    assert b2.read_file("hello.py") == "print('hello')"
    b2.shutdown()
    client.delete_workspace(pid)
