"""Every method of agentfs.Client and agentfs.Workspace against a real daemon."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from typing import List

import pytest

import agentfs
from conftest import Daemon, unique


def test_health_and_openapi(client: agentfs.Client) -> None:
    h = client.health()
    assert h.status == "ok" and h.version
    doc = client.openapi()
    assert doc["openapi"].startswith("3.1")
    assert "/v1/workspaces/{name}/exec" in doc["paths"]


def test_env_defaults(daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTFS_URL", daemon.url)
    monkeypatch.setenv("AGENTFS_TOKEN", daemon.token)
    with agentfs.Client() as c:
        assert c.url == daemon.url
        c.list_workspaces()
    monkeypatch.delenv("AGENTFS_TOKEN")
    with pytest.raises(ValueError, match="AGENTFS_TOKEN"):
        agentfs.Client()


def test_workspace_crud(client: agentfs.Client) -> None:
    name = unique("crud")
    ws = client.create_workspace(name, metadata={"owner": "py"})
    assert ws.name == name
    info = ws.info()
    assert info.name == name and info.metadata == {"owner": "py"} and not info.virtual
    assert info.status in ("mounted", "unmounted")
    assert name in [w.name for w in client.list_workspaces()]
    with pytest.raises(agentfs.Exists) as ei:
        client.create_workspace(name)
    assert ei.value.status == 409 and ei.value.code == "exists"
    ws.delete()
    with pytest.raises(agentfs.NotFound):
        client.get_workspace(name)
    with pytest.raises(agentfs.NotFound):
        client.delete_workspace(name)
    client.delete_workspace(name, missing_ok=True)


def test_backend(client: agentfs.Client) -> None:
    ws = client.create_workspace(unique("backend"), backend=agentfs.Backend("local"))
    try:
        assert ws.info().backend == agentfs.Backend("local")
        assert ws.exec("echo hi").stdout == "hi\n"
    finally:
        ws.delete()
    # Docker options are refused with the local backend, by the daemon.
    with pytest.raises(agentfs.InvalidArgument):
        client.create_workspace(unique("backend"), backend=agentfs.Backend("local", image="busybox"))
    assert agentfs.Backend("docker", image="img", cpus=1.5, network=True).to_json() == {
        "type": "docker", "image": "img", "cpus": 1.5, "network": True}


def test_fork(client: agentfs.Client, ws: agentfs.Workspace) -> None:
    ws.write("a.txt", "one")
    f = ws.fork(unique("fork"))
    try:
        assert f.read_text("a.txt") == "one"
        f.write("a.txt", "two")
        assert ws.read_text("a.txt") == "one"
        assert f.info().from_ == ws.name
    finally:
        f.delete()


def test_lifetime(client: agentfs.Client) -> None:
    ws = client.create_workspace(unique("life"), lifetime=600)
    try:
        info = ws.info()
        assert info.expires_at is not None and info.expires_at > info.created
    finally:
        ws.delete()


def test_exec(ws: agentfs.Workspace) -> None:
    r = ws.exec("echo out; echo err >&2; echo data > f.txt; exit 3")
    assert r.exit_code == 3 and not r.ok
    assert r.stdout == "out\n" and r.stderr == "err\n"
    assert sorted(r.output.splitlines()) == ["err", "out"]
    assert not r.timed_out and not r.truncated and r.duration_ms >= 0
    assert r.changes is not None and r.changes.created == ["f.txt"]
    r2 = ws.exec(["sh", "-c", 'printf "%s|%s|%s" "$1" "$FOO" "$(pwd | xargs basename)"', "x", "a b"],
                 env={"FOO": "bar"}, cwd="sub" if ws.mkdir("sub") is None else None)
    assert r2.ok and r2.stdout == "a b|bar|sub"
    assert ws.exec("cat", stdin="hello\n").stdout == "hello\n"
    assert ws.exec("true").changes is not None


def test_exec_binary(ws: agentfs.Workspace) -> None:
    blob = bytes(range(256)) * 4
    ws.write("blob.bin", blob)
    r = ws.exec("cat blob.bin", binary=True)
    assert isinstance(r.stdout, bytes) and r.stdout == blob and r.output == blob
    # binary stdin, text output
    r2 = ws.exec("wc -c", stdin=blob)
    assert r2.stdout.strip() == str(len(blob))
    # a tarball back byte for byte, as agent-backend's exec(..., encoding="buffer")
    ws.write("d/x.txt", "x")
    tar = ws.exec("tar -czf - d", binary=True)
    assert tar.stdout[:2] == b"\x1f\x8b"
    ws.write("t.tgz", tar.stdout)
    assert ws.exec("tar -tzf t.tgz").stdout.split() == ["d/", "d/x.txt"]
    # invalid UTF-8 without binary: replaced, not an error
    assert "\ufffd" in ws.exec("printf '\\377ok'").stdout


def test_exec_timeout_kills_tree(ws: agentfs.Workspace) -> None:
    t0 = time.monotonic()
    r = ws.exec("sleep 31.25 & sleep 31.25; echo never", timeout=0.5)
    assert r.timed_out and r.exit_code == 137 and "never" not in r.stdout
    assert time.monotonic() - t0 < 15
    # the background sleep died with the tree: nothing of it is left
    assert ws.exec("pgrep -f 'sleep 31[.]25' || true").stdout.strip() == ""


def test_exec_output_limit(ws: agentfs.Workspace) -> None:
    r = ws.exec("head -c 100000 /dev/zero | tr '\\0' a", output_limit=1000)
    assert r.truncated and len(r.stdout) <= 1000


def test_exec_stream(ws: agentfs.Workspace) -> None:
    with ws.exec_stream("echo one; sleep 0.3; echo two >&2; echo three") as s:
        chunks = list(s)
        res = s.result
    assert "".join(c.data for c in chunks if c.stream == "stdout") == "one\nthree\n"
    assert "".join(c.data for c in chunks if c.stream == "stderr") == "two\n"
    assert res.exit_code == 0 and res.stdout == ""
    # the first chunk arrives before the command ends
    s2 = ws.exec_stream("echo first; sleep 1.5; echo last")
    t0 = time.monotonic()
    first = next(iter(s2))
    assert first.data == "first\n" and time.monotonic() - t0 < 1.2
    assert s2.result.ok
    # binary
    ws.write("b.bin", b"\x00\xff\xfe")
    s3 = ws.exec_stream("cat b.bin", binary=True)
    assert b"".join(c.data for c in s3) == b"\x00\xff\xfe" and s3.result.ok


def test_exec_stream_errors(ws: agentfs.Workspace) -> None:
    with pytest.raises(agentfs.PathEscape):
        ws.exec_stream("true", cwd="../..")


def test_jobs(ws: agentfs.Workspace) -> None:
    j = ws.start_job("echo started; sleep 0.5; echo done; exit 4")
    info = j.info()
    assert info.id == j.id and info.command
    done = j.wait(timeout=30)
    assert not done.running and done.exit_code == 4
    assert done.result is not None and done.result.stdout == "started\ndone\n"
    out = j.output()
    assert out.output == "started\ndone\n" and out.next_offset == len("started\ndone\n") and not out.running
    assert j.output(offset=8).output == "done\n"
    assert j.id in [x.id for x in ws.list_jobs()]


def test_job_wait_timeout_and_kill(ws: agentfs.Workspace) -> None:
    j = ws.start_job("sleep 60")
    with pytest.raises(agentfs.Timeout) as ei:
        j.wait(timeout=0.3)
    assert isinstance(ei.value, TimeoutError)
    k = j.kill()
    assert not k.running and k.exit_code is not None and k.exit_code != 0
    with pytest.raises(agentfs.NotFound):
        ws.job("job-999999").info()


def test_job_binary_output(ws: agentfs.Workspace) -> None:
    j = ws.start_job("printf '\\000\\377'", binary=True)
    j.wait()
    assert j.output().output == b"\x00\xff"


def test_files(ws: agentfs.Workspace) -> None:
    assert ws.write("dir/sub/a.txt", "alpha\nbeta\ngamma\n").size == len("alpha\nbeta\ngamma\n")
    assert ws.read_text("dir/sub/a.txt") == "alpha\nbeta\ngamma\n"
    assert ws.read_bytes("dir/sub/a.txt") == b"alpha\nbeta\ngamma\n"
    n = ws.read_numbered("dir/sub/a.txt", offset=1, limit=1)
    assert n.content == "     2\tbeta\n" and n.total_lines == 3 and n.lines == 1 and n.offset == 1
    assert ws.read_numbered("dir/sub/a.txt").lines == 3
    assert ws.edit("dir/sub/a.txt", "beta", "BETA") == 1
    ws.write("r.txt", "x x x")
    assert ws.edit("r.txt", "x", "y", replace_all=True) == 3
    with pytest.raises(agentfs.NotUnique):
        ws.edit("dir/sub/a.txt", "a", "b")
    with pytest.raises(agentfs.NotFound):
        ws.edit("dir/sub/a.txt", "zzz", "b")
    st = ws.stat("dir/sub/a.txt")
    assert st.is_file and st.name == "a.txt" and st.path == "dir/sub/a.txt" and st.size == 17
    assert ws.stat("dir").is_dir
    assert ws.exists("dir/sub/a.txt") and not ws.exists("nope")
    ws.mkdir("m/n/o", parents=True)
    ws.mkdir("m/n/o", parents=True)
    with pytest.raises(agentfs.Exists):
        ws.mkdir("m")
    with pytest.raises(agentfs.NotFound):
        ws.mkdir("q/r")
    assert [e.name for e in ws.list_dir("dir")] == ["sub"]
    rec = [e.path for e in ws.list_dir("dir", recursive=True)]
    assert rec == ["dir/sub", "dir/sub/a.txt"]
    assert "r.txt" in [e.name for e in ws.list_dir()]
    ws.write("dir/sub/b.py", "def f():\n    return 1\n")
    assert ws.glob("**/*.py") == ["dir/sub/b.py"]
    assert ws.glob("*.txt", path="dir/sub") == ["dir/sub/a.txt"]
    g = ws.grep(r"def \w+\(")
    assert [(m.path, m.line, m.text) for m in g.matches] == [("dir/sub/b.py", 1, "def f():")]
    assert not g.truncated
    assert len(ws.grep("BETA", glob="*.txt", literal=True).matches) == 1
    assert len(ws.grep("beta", path="dir", ignore_case=True).matches) == 1
    ws.write("many.txt", "hit\n" * 10)
    assert ws.grep("hit", max_results=3).truncated
    ws.copy("r.txt", "r2.txt")
    assert ws.read_text("r2.txt") == "y y y"
    ws.rename("r2.txt", "dir/r3.txt")
    assert not ws.exists("r2.txt") and ws.read_text("dir/r3.txt") == "y y y"
    ws.remove("dir/r3.txt")
    with pytest.raises(agentfs.NotEmpty):
        ws.remove("dir")
    ws.remove("dir", recursive=True)
    assert not ws.exists("dir")


def test_file_errors(ws: agentfs.Workspace) -> None:
    with pytest.raises(agentfs.NotFound) as ei:
        ws.read_text("missing.txt")
    assert ei.value.path == "missing.txt" and ei.value.status == 404
    for bad in ("../etc/passwd", "a/../../x", "/etc/passwd"):
        with pytest.raises(agentfs.PathEscape):
            ws.read_bytes(bad)
        with pytest.raises(agentfs.PathEscape):
            ws.write(bad, "x")
        with pytest.raises(agentfs.PathEscape):
            ws.stat(bad)
    with pytest.raises(agentfs.PathEscape):
        ws.exec("true", cwd="../")
    ws.exec("ln -s /etc escape")
    with pytest.raises(agentfs.PathEscape):
        ws.read_bytes("escape/passwd")
    ws.mkdir("adir")
    with pytest.raises(agentfs.IsADirectory):
        ws.read_bytes("adir")
    with pytest.raises(agentfs.NotFound):
        ws.stat("nope")
    with pytest.raises(ValueError):
        ws.exec([])
    with pytest.raises(agentfs.InvalidArgument):
        ws.exec("")
    with pytest.raises(agentfs.InvalidArgument):
        ws.read_numbered("adir", offset=-1)


def test_wrong_token(daemon: Daemon, client: agentfs.Client, ws: agentfs.Workspace) -> None:
    with agentfs.Client(daemon.url, "wrong") as bad:
        with pytest.raises(agentfs.Unauthorized) as ei:
            bad.list_workspaces()
        assert ei.value.status == 401
        with pytest.raises(agentfs.Unauthorized):
            bad.workspace(ws.name).read_bytes("x")
        assert bad.health().status == "ok"


def test_workspace_tokens(daemon: Daemon, client: agentfs.Client, ws: agentfs.Workspace) -> None:
    other = client.create_workspace(unique("other"))
    try:
        tok = client.create_token(ws.name)
        ro = client.create_token(ws.name, read_only=True)
        assert tok.token and tok.workspace == ws.name and ro.read_only
        assert tok.id in [t.id for t in client.list_tokens()]
        assert {t.id for t in client.list_tokens(ws.name)} == {tok.id, ro.id}
        assert client.list_tokens(other.name) == []
        with agentfs.Client(daemon.url, tok.token) as c:
            c.workspace(ws.name).write("t.txt", "ok")
            with pytest.raises(agentfs.Forbidden):
                c.workspace(other.name).read_bytes("x")
            with pytest.raises(agentfs.Forbidden):
                c.list_workspaces()
        with agentfs.Client(daemon.url, ro.token) as c:
            assert c.workspace(ws.name).read_text("t.txt") == "ok"
            with pytest.raises(agentfs.Forbidden):
                c.workspace(ws.name).write("t.txt", "no")
        client.revoke_token(tok.id)
        with agentfs.Client(daemon.url, tok.token) as c:
            with pytest.raises(agentfs.Unauthorized):
                c.workspace(ws.name).read_bytes("t.txt")
    finally:
        other.delete()


def test_unicode_paths(ws: agentfs.Workspace) -> None:
    names = ["café/naïve.txt", "日本語/ファイル.md", "emoji 🎉/a b&c?d#e%f.txt", "спутник.txt"]
    for i, p in enumerate(names):
        ws.write(p, f"content {i} ✓")
    for i, p in enumerate(names):
        assert ws.read_text(p) == f"content {i} ✓"
        assert ws.exists(p)
        assert ws.stat(p).path == p
    assert "日本語/ファイル.md" in ws.glob("**/*.md")
    ws.rename("спутник.txt", "спутник2.txt")
    assert ws.exec(["cat", "спутник2.txt"]).stdout == "content 3 ✓"
    ws.remove("emoji 🎉", recursive=True)
    assert not ws.exists("emoji 🎉/a b&c?d#e%f.txt")


def test_binary_round_trip(ws: agentfs.Workspace) -> None:
    data = os.urandom(1 << 20) + bytes(range(256))
    ws.write("rand.bin", data)
    assert ws.read_bytes("rand.bin") == data
    ws.write("empty", b"")
    assert ws.read_bytes("empty") == b""


def test_large_file_64mib(ws: agentfs.Workspace) -> None:
    data = os.urandom(64 << 20)
    assert ws.write("big.bin", data).size == len(data)
    r = ws.exec("sha256sum big.bin")
    assert r.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    assert ws.read_bytes("big.bin") == data


def test_threads(client: agentfs.Client, ws: agentfs.Workspace) -> None:
    errors: List[BaseException] = []

    def worker(i: int) -> None:
        try:
            for k in range(5):
                p = f"th/{i}/{k}.txt"
                ws.write(p, f"{i}-{k}")
                assert ws.read_text(p) == f"{i}-{k}"
            r = ws.exec(f"cat th/{i}/4.txt")
            assert r.stdout == f"{i}-4"
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert len(ws.glob("th/**/*.txt")) == 40


def test_connection_refused() -> None:
    with agentfs.Client("http://127.0.0.1:9", "x", retries=1) as c:
        with pytest.raises(agentfs.ConnectionFailed, match="agentfs serve"):
            c.list_workspaces()


def test_keepalive_reuse_after_idle(client: agentfs.Client, ws: agentfs.Workspace) -> None:
    # many calls on the pool, then the pool is reused: no connection error leaks out
    for _ in range(20):
        assert ws.exists("nothing") is False
    assert client.transport._idle, "connections are kept alive in the pool"
