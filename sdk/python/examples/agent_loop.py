"""An agent-style loop: write code, run its tests, fork two attempts at a fix, compare
them, keep the better one.

Each attempt works in a fork of the workspace (O(1): the data is shared); the
loser is deleted, the winner's files are brought back.
"""

from __future__ import annotations

import os

import agentfs

CODE = "def add(a, b):\n    return a - b\n"
TESTS = (
    "from calc import add\n"
    "assert add(2, 3) == 5, add(2, 3)\n"
    "assert add(-1, 1) == 0\n"
    "print('tests pass')\n"
)
ATTEMPTS = {
    "a": ("return a - b", "return b - a"),  # wrong
    "b": ("return a - b", "return a + b"),  # right
}


def run_tests(ws: agentfs.Workspace) -> agentfs.ExecResult[str]:
    return ws.exec("python3 test_calc.py", timeout=60)


def main() -> None:
    with agentfs.Client() as client:
        tag = os.getpid()
        ws = client.create_workspace(f"loop-{tag}")
        forks = []
        try:
            ws.write("calc.py", CODE)
            ws.write("test_calc.py", TESTS)
            first = run_tests(ws)
            print("initial tests: exit", first.exit_code, first.stderr.strip().splitlines()[-1])
            results = {}
            for key, (old, new) in ATTEMPTS.items():
                f = ws.fork(f"loop-{tag}-{key}")
                forks.append(f)
                f.edit("calc.py", old, new)
                r = run_tests(f)
                results[key] = r
                print(f"attempt {key}: exit {r.exit_code}, changed {r.changes}")
            best = min(results, key=lambda k: results[k].exit_code)
            winner = next(f for f in forks if f.name.endswith("-" + best))
            print("attempt", best, "wins:", winner.read_text("calc.py").strip().splitlines()[-1].strip())
            ws.write("calc.py", winner.read_bytes("calc.py"))
            assert run_tests(ws).ok
        finally:
            for f in forks:
                f.delete()
            ws.delete()


if __name__ == "__main__":
    main()
