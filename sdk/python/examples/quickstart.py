"""Quick start: create a workspace, write a file, run it, stream a command, clean up.

Run with a daemon: AGENTFS_URL=http://127.0.0.1:7070 AGENTFS_TOKEN=... python3 quickstart.py
"""

from __future__ import annotations

import os

import agentfs


def main() -> None:
    with agentfs.Client() as client:
        ws = client.create_workspace(f"quickstart-{os.getpid()}")
        try:
            ws.write("hello.py", "print('hello from agentfs')\n")
            r = ws.exec("python3 hello.py")
            print(r.stdout.strip(), "exit", r.exit_code, "changes", r.changes)
            with ws.exec_stream("for i in 1 2 3; do echo tick $i; sleep 0.1; done") as s:
                for chunk in s:
                    print(chunk.stream, chunk.data.strip())
                assert s.result.ok
            try:
                ws.read_text("../outside")
            except agentfs.PathEscape as e:
                print("refused:", e.code)
        finally:
            ws.delete()


if __name__ == "__main__":
    main()
