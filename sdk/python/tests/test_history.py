"""Snapshots, diff, branches, forks from snapshots, virtual workspaces and tar transfer,
through the client, and the adapters built on them."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile

import pytest

import agentfs
from agentfs.compat import omniagents as om
from agentfs.compat import pydantic_deep as pd
from conftest import unique


def test_snapshots_restore_diff(client: agentfs.Client, ws: agentfs.Workspace) -> None:
    ws.write("a.txt", "one\n")
    ws.write("gone.txt", "bye\n")
    snap = unique("s")
    s = ws.save_snapshot(snap, "first")
    assert s.name == snap and s.message == "first" and s.commit
    with pytest.raises(agentfs.Exists):
        ws.save_snapshot(snap)
    listed = {x.name: x for x in ws.list_snapshots()}
    assert snap in listed and listed[snap].commit == s.commit
    assert all(x.unique_bytes is not None for x in ws.list_snapshots(unique=True))
    ws.write("a.txt", "two\n")
    ws.write("new.txt", "new\n")
    ws.remove("gone.txt")
    d = ws.diff(snap)
    assert [(c.op, c.path) for c in d.changes] == [("modified", "a.txt"), ("deleted", "gone.txt"),
                                                   ("added", "new.txt")]
    assert d.from_ and d.to
    p = ws.diff(snap, patch=True, path="")
    assert "-one" in p.changes[0].patch and "+two" in p.changes[0].patch
    r = ws.restore(snap)
    assert r.commit
    assert ws.read_text("a.txt") == "one\n" and not ws.exists("new.txt") and ws.exists("gone.txt")
    assert ws.diff(snap).changes == []
    if r.saved:
        assert r.saved in [x.name for x in ws.list_snapshots()]
    # a workspace from the snapshot, and a fork of it
    w2 = client.create_workspace(unique("fromsnap"), from_snapshot=snap)
    f = ws.fork(unique("forksnap"), snapshot=snap)
    try:
        assert w2.read_text("a.txt") == "one\n" and f.read_text("gone.txt") == "bye\n"
    finally:
        w2.delete()
        f.delete()
    names = [b.name for b in ws.branches()]
    assert ws.name in names
    ws.delete_snapshot(snap)
    assert snap not in [x.name for x in ws.list_snapshots()]
    with pytest.raises(agentfs.NotFound):
        ws.delete_snapshot(snap)
    with pytest.raises(agentfs.NotFound):
        ws.restore(snap)
    with pytest.raises(agentfs.PathEscape):
        ws.diff("live", path="../x")


def test_virtual_over_snapshot(client: agentfs.Client, ws: agentfs.Workspace) -> None:
    ws.write("base.txt", "base\n")
    snap = unique("vbase")
    ws.save_snapshot(snap)
    v = client.create_workspace(unique("virt"), virtual_base="snapshot:" + snap)
    try:
        assert v.info().virtual
        assert v.read_text("base.txt") == "base\n"
        v.write("base.txt", "changed\n")
        v.write("added.txt", "added\n")
        v.write("tmp.txt", "tmp\n")
        d = v.virtual_diff(stat=True)
        assert {(c.op, c.path) for c in d.changes} == {("modified", "base.txt"), ("added", "added.txt"),
                                                        ("added", "tmp.txt")}
        assert d.base
        assert [c.path for c in v.virtual_diff(["base.txt"], patch=True).changes] == ["base.txt"]
        disc = v.virtual_discard(["tmp.txt"])
        assert [c.path for c in disc.discarded] == ["tmp.txt"] and disc.pending == 2
        assert not v.exists("tmp.txt")
        c = v.virtual_commit(message="from python", snapshot=unique("vcommit"))
        assert {ch.path for ch in c.changes} == {"base.txt", "added.txt"} and c.pending == 0
        assert v.virtual_diff().changes == []
    finally:
        v.delete()


def test_virtual_over_host_dir_and_pydantic_virtual_files(client: agentfs.Client) -> None:
    base = tempfile.mkdtemp(prefix="agentfs-pyv-")
    with open(os.path.join(base, "existing_file.py"), "w") as f:
        f.write("x = 1\n")
    name = unique("pdvirt")
    b = pd.AgentFSBackend(name, virtual_mode=True, base=base, client=client)
    try:
        assert b.virtual_files == []
        b.write("/new_file.py", "content")
        b.edit("/existing_file.py", "x = 1", "x = 2")
        assert sorted(b.virtual_files) == ["/existing_file.py", "/new_file.py"]
        with open(os.path.join(base, "existing_file.py")) as f:
            assert f.read() == "x = 1\n"
        b.workspace.virtual_discard()
        assert b.virtual_files == [] and b.read("/existing_file.py") == "     1\tx = 1\n"
    finally:
        client.delete_workspace(name)


def test_tar(ws: agentfs.Workspace) -> None:
    ws.write("d/a.txt", "a")
    ws.write("d/sub/b.bin", b"\x00\xff")
    ws.write("d/ü.txt", "u")
    data = ws.download_tar("d")
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        names = sorted(n.lstrip("./") for n in tf.getnames() if n not in (".", "./"))
    assert names == ["a.txt", "sub", "sub/b.bin", "ü.txt"]
    ch = ws.upload_tar(data, "copy/here")
    assert ch is not None and "copy/here/sub/b.bin" in ch.created
    assert ws.read_bytes("copy/here/sub/b.bin") == b"\x00\xff" and ws.read_text("copy/here/ü.txt") == "u"
    whole = ws.download_tar()
    with tarfile.open(fileobj=io.BytesIO(whole)) as tf:
        assert any(n.endswith("copy/here/a.txt") for n in tf.getnames())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("big.bin")
        payload = os.urandom(3 << 20)
        info.size = len(payload)
        tf.addfile(info, io.BytesIO(payload))
    ws.upload_tar(buf.getvalue())
    assert ws.read_bytes("big.bin") == payload
    with pytest.raises(agentfs.InvalidArgument):
        ws.upload_tar(b"not a tar archive at all" * 40)
    with pytest.raises(agentfs.PathEscape):
        ws.download_tar("../..")
    with pytest.raises(agentfs.NotFound):
        ws.download_tar("nope")


def test_omniagents_state_manager(client: agentfs.Client) -> None:
    pid = unique("omnistate")
    sm = om.AgentFSStateManager(client)
    b = om.AgentFSBackend(project_id=pid, state_manager=sm, client=client)
    try:
        b.start()  # nothing to load yet
        assert sm.list_snapshots(pid) == []
        b.write_file("app.py", "v1")
        sid = sm.save_snapshot(b, "first")
        assert sid.startswith(pid + ".")
        b.write_file("app.py", "v2")
        b.shutdown()  # saves a second snapshot
        snaps = sm.list_snapshots(pid)
        assert [s.message for s in snaps] == ["first", ""] and snaps[0].snapshot_id == sid
        assert all(s.project_id == pid for s in snaps)
        b.write_file("app.py", "unsaved")
        b2 = om.AgentFSBackend(project_id=pid, state_manager=sm, client=client)
        b2.start()  # load_latest restores the newest snapshot
        assert b2.read_file("app.py") == "v2"
        b2.shutdown()
        sm.cleanup(pid)
        assert sm.list_snapshots(pid) == []
        assert sm.list_snapshots("no-such-project") == []
        assert sm.load_latest(b2) is False
    finally:
        client.delete_workspace(pid, missing_ok=True)
