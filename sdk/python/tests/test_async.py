"""The asyncio client against the real daemon, including concurrent tasks."""

from __future__ import annotations

import asyncio
from typing import List

import pytest

import agentfs
from conftest import Daemon, unique


def run(coro: "asyncio.Future[None] | object") -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_async_surface(daemon: Daemon) -> None:
    async def main() -> None:
        async with agentfs.AsyncClient(daemon.url, daemon.token) as c:
            assert (await c.health()).status == "ok"
            ws = await c.create_workspace(unique("aio"))
            try:
                assert ws.name in [w.name for w in await c.list_workspaces()]
                assert (await c.get_workspace(ws.name)).name == ws.name
                assert (await ws.info()).name == ws.name
                await ws.write("a/b.txt", "hello\nworld\n")
                assert await ws.read_text("a/b.txt") == "hello\nworld\n"
                assert await ws.read_bytes("a/b.txt") == b"hello\nworld\n"
                assert (await ws.read_numbered("a/b.txt", offset=1)).content == "     2\tworld\n"
                assert await ws.edit("a/b.txt", "world", "there") == 1
                assert await ws.exists("a/b.txt")
                assert (await ws.stat("a")).is_dir
                assert [e.path for e in await ws.list_dir("a")] == ["a/b.txt"]
                assert await ws.glob("**/*.txt") == ["a/b.txt"]
                assert (await ws.grep("there")).matches[0].line == 2
                await ws.mkdir("x/y", parents=True)
                await ws.copy("a/b.txt", "x/c.txt")
                await ws.rename("x/c.txt", "x/y/d.txt")
                assert await ws.read_text("x/y/d.txt") == "hello\nthere\n"
                await ws.remove("x", recursive=True)
                r = await ws.exec("cat a/b.txt")
                assert r.stdout == "hello\nthere\n"
                rb = await ws.exec("printf '\\377'", binary=True)
                assert rb.stdout == b"\xff"
                s = await ws.exec_stream("echo 1; echo 2 >&2")
                chunks = [ch async for ch in s]
                assert sorted(ch.data for ch in chunks) == ["1\n", "2\n"]
                assert (await s.result()).ok
                j = await ws.start_job("sleep 0.2; echo bg")
                done = await j.wait(10)
                assert done.exit_code == 0 and (await j.output()).output == "bg\n"
                assert (await j.info()).exit_code == 0
                assert j.id in [x.id for x in await ws.list_jobs()]
                j2 = await ws.start_job("sleep 60")
                with pytest.raises(agentfs.Timeout):
                    await j2.wait(0.2)
                assert not (await j2.kill()).running
                snap = unique("asnap")
                assert (await ws.save_snapshot(snap, "m")).name == snap
                assert snap in [x.name for x in await ws.list_snapshots()]
                await ws.write("a/b.txt", "changed\n")
                assert [ch.path for ch in (await ws.diff(snap)).changes] == ["a/b.txt"]
                assert (await ws.restore(snap)).commit
                assert await ws.read_text("a/b.txt") == "hello\nthere\n"
                assert ws.name in [b.name for b in await ws.branches()]
                tar = await ws.download_tar("a")
                assert (await ws.upload_tar(tar, "a2")) is not None
                assert await ws.read_text("a2/b.txt") == "hello\nthere\n"
                v = await c.create_workspace(unique("avirt"), virtual_base="snapshot:" + snap)
                await v.write("v.txt", "v")
                assert [ch.path for ch in (await v.virtual_diff()).changes] == ["v.txt"]
                assert (await v.virtual_discard()).pending == 0
                await v.write("w.txt", "w")
                assert (await v.virtual_commit(snapshot=unique("avc"))).pending == 0
                await v.delete()
                await ws.delete_snapshot(snap)
                f = await ws.fork(unique("afork"))
                assert await f.read_text("a/b.txt") == "hello\nthere\n"
                await f.delete()
                tok = await c.create_token(ws.name, read_only=True)
                assert tok.id in [t.id for t in await c.list_tokens()]
                await c.revoke_token(tok.id)
                with pytest.raises(agentfs.NotFound):
                    await ws.read_text("nope")
            finally:
                await c.delete_workspace(ws.name, missing_ok=True)

    run(main())


def test_async_concurrency(daemon: Daemon) -> None:
    async def main() -> None:
        async with agentfs.AsyncClient(daemon.url, daemon.token, pool_size=4) as c:
            wss = [await c.create_workspace(unique("acon")) for _ in range(3)]
            try:
                async def task(i: int) -> str:
                    ws = wss[i % len(wss)]
                    await ws.write(f"t/{i}.txt", str(i))
                    r = await ws.exec(f"cat t/{i}.txt")
                    return r.stdout

                outs: List[str] = await asyncio.gather(*(task(i) for i in range(24)))
                assert outs == [str(i) for i in range(24)]
                # concurrent commands really overlap: 6 × 0.5 s sleeps take well under 3 s
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                await asyncio.gather(*(wss[i % 3].exec("sleep 0.5") for i in range(6)))
                assert loop.time() - t0 < 2.5
            finally:
                for ws in wss:
                    await ws.delete()

    run(main())
