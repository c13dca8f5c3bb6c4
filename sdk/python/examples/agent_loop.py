"""An agent-style loop: write code, run its tests, save a snapshot, fork two attempts at
a fix, diff them against the snapshot, keep the better one.

Each attempt works in a fork of the workspace (O(1): the data is shared); the
loser is deleted, the winner's change is brought back.
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
            snap = f"loop-{tag}-start"
            ws.save_snapshot(snap, "code and failing tests")
            results = {}
            for key, (old, new) in ATTEMPTS.items():
                f = ws.fork(f"loop-{tag}-{key}")
                forks.append(f)
                f.edit("calc.py", old, new)
                r = run_tests(f)
                results[key] = r
                diff = f.diff(snap, patch=True)
                print(f"attempt {key}: exit {r.exit_code}; diff against {snap}:")
                for ch in diff.changes:
                    print(f"  {ch.op} {ch.path}")
                    print("    " + "\n    ".join(ch.patch.splitlines()))
            best = min(results, key=lambda k: results[k].exit_code)
            winner = next(f for f in forks if f.name.endswith("-" + best))
            print("attempt", best, "wins:", winner.read_text("calc.py").strip().splitlines()[-1].strip())
            ws.write("calc.py", winner.read_bytes("calc.py"))
            assert run_tests(ws).ok
            print("kept; changes since the snapshot:", [c.path for c in ws.diff(snap).changes])
            ws.delete_snapshot(snap)
        finally:
            for f in forks:
                f.delete()
            ws.delete()


if __name__ == "__main__":
    main()
