"""agentfs.compat.pydantic_deep: shape against the seed, behaviour against the daemon."""

from __future__ import annotations

import os
import tempfile

import pytest

import agentfs
from agentfs.compat import pydantic_deep as pd
from conftest import unique
from seeds import PYDANTIC_DEEP, PYDANTIC_DEEP_DATA
from shape import check_class, check_fields


def test_shape() -> None:
    check_class(pd.BackendProtocol, PYDANTIC_DEEP["BackendProtocol"])
    check_class(pd.SandboxProtocol, PYDANTIC_DEEP["SandboxProtocol"])
    check_class(pd.AgentFSBackend, PYDANTIC_DEEP["BackendProtocol"])
    check_class(pd.AgentFSBackend, PYDANTIC_DEEP["SandboxProtocol"])
    for name, fields in PYDANTIC_DEEP_DATA.items():
        check_fields(getattr(pd, name), fields)
    for name in ("FileInfo", "EditResult", "GrepMatch"):
        check_fields(getattr(pd, name), [])


def test_backend(client: agentfs.Client) -> None:
    name = unique("pd")
    b = pd.AgentFSBackend(name, client=client)
    assert isinstance(b, pd.BackendProtocol) and isinstance(b, pd.SandboxProtocol)
    try:
        assert b.id == name
        assert b.write("/src/app.py", "def main():\n    print('hello')\n") == pd.WriteResult(path="/src/app.py")
        assert b.read("/src/app.py") == "     1\tdef main():\n     2\t    print('hello')\n"
        assert b.read("src/app.py", offset=1, limit=1) == "     2\t    print('hello')\n"
        assert b.read("/missing.py").startswith("Error:")
        e = b.edit("/src/app.py", "hello", "world")
        assert e.occurrences == 1 and e.error is None and e.path == "/src/app.py"
        assert b.edit("/src/app.py", "nothere", "x").error
        b.write("/src/b.py", "x = 1\nx = 2\n")
        assert b.edit("/src/b.py", "x", "y").error
        assert b.edit("/src/b.py", "x", "y", replace_all=True).occurrences == 2
        ls = b.ls_info("/")
        assert [(f.name, f.path, f.is_dir) for f in ls] == [("src", "/src", True)]
        assert {f.path for f in b.ls_info("/src")} == {"/src/app.py", "/src/b.py"}
        g = b.glob_info("**/*.py")
        assert [(f.path, f.is_dir) for f in g] == [("/src/app.py", False), ("/src/b.py", False)]
        assert g[0].size == len("def main():\n    print('world')\n")
        assert [f.path for f in b.glob_info("*.py", path="/src")] == ["/src/app.py", "/src/b.py"]
        m = b.grep_raw(r"def \w+\(", path="/src")
        assert m == [pd.GrepMatch(path="/src/app.py", line_number=1, line="def main():")]
        assert b.grep_raw("y = 2", glob="*.py") == [pd.GrepMatch(path="/src/b.py", line_number=2, line="y = 2")]
        assert isinstance(b.grep_raw("("), str)
        r = b.execute("cd src && python3 -c 'import app; app.main()'", timeout=30)
        assert r == pd.ExecuteResponse(output="world\n", exit_code=0, truncated=False)
        assert b.execute("exit 3").exit_code == 3
        for bad in ("../etc/passwd", "~/secrets", "C:\\Windows\\x"):
            with pytest.raises(agentfs.PathEscape):
                b.read(bad)
    finally:
        client.delete_workspace(name)


def test_virtual_mode_over_host_dir(client: agentfs.Client) -> None:
    base = tempfile.mkdtemp(prefix="agentfs-pd-base-")
    with open(os.path.join(base, "existing_file.py"), "w") as f:
        f.write("old = True\n")
    name = unique("pdv")
    b = pd.AgentFSBackend(name, virtual_mode=True, base=base, client=client)
    try:
        assert client.get_workspace(name).virtual
        assert b.read("/existing_file.py") == "     1\told = True\n"
        b.write("/new_file.py", "content")
        assert b.read("/new_file.py") == "     1\tcontent\n"
        # the host directory is not touched
        assert sorted(os.listdir(base)) == ["existing_file.py"]
        with pytest.raises(agentfs.InvalidArgument):
            pd.AgentFSBackend(unique("pdx"), client=client).__class__(
                pd.AgentFSBackend(unique("plain"), client=client).id, virtual_mode=True, base=base, client=client)
    finally:
        client.delete_workspace(name)
        for w in client.list_workspaces():
            if w.name.startswith("plain-") or w.name.startswith("pdx-"):
                client.delete_workspace(w.name)
