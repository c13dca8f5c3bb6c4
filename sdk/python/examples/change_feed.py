"""The change feed: watch a workspace's changes as a command makes them, then resume
from the last event seen, and watch them from asyncio.

Run with a daemon: AGENTFS_URL=http://127.0.0.1:7070 AGENTFS_TOKEN=... python3 change_feed.py
"""

from __future__ import annotations

import asyncio
import os

import agentfs


def main() -> None:
    with agentfs.Client() as client:
        ws = client.create_workspace(f"feed-{os.getpid()}")
        try:
            with ws.changes(path="src") as feed:  # subscribed: what happens from now on is delivered
                ws.exec("mkdir -p src && echo 'print(1)' > src/a.py && mv src/a.py src/main.py && touch notes.txt")
                for ev in feed:
                    print(ev.op, ev.type, ev.path)  # notes.txt is outside src: not delivered
                    if ev.op == "created" and ev.path == "src/main.py":
                        break
            seen = feed.last_id
            ws.write("src/later.py", "print(2)\n")
            with ws.changes(since=seen) as feed:  # resumes after the last event seen: nothing is missed
                ev = next(feed)
                print("resumed:", ev.op, ev.path)
            asyncio.run(watch_async(client, ws.name))
        finally:
            ws.delete()


async def watch_async(client: agentfs.Client, name: str) -> None:
    async with agentfs.AsyncClient(client=client) as ac:
        ws = ac.workspace(name)
        async with ws.changes() as feed:
            await ws.write("from-asyncio.txt", "hi")
            async for ev in feed:
                print("async:", ev.op, ev.path)
                if ev.path == "from-asyncio.txt":
                    break


if __name__ == "__main__":
    main()
