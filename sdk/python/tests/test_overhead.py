"""The SDK's overhead over raw HTTP: p50 of exec("true") and of a 4 KiB read through
agentfs.Client vs a bare http.client request on one kept-alive connection, interleaved
in the same run. Prints the figures (pytest -s); fails only on a gross regression."""

from __future__ import annotations

import http.client
import json
import os
import statistics
import time
import urllib.parse
from typing import Callable, List, Tuple

import agentfs
from conftest import Daemon

N = int(os.environ.get("AGENTFS_BENCH_N", "200"))


def p50(xs: List[float]) -> float:
    return statistics.median(xs) * 1000


def interleave(n: int, a: Callable[[], object], b: Callable[[], object]) -> Tuple[List[float], List[float]]:
    ta: List[float] = []
    tb: List[float] = []
    for _ in range(5):
        a()
        b()
    for _ in range(n):
        t0 = time.perf_counter()
        a()
        t1 = time.perf_counter()
        b()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return ta, tb


def test_overhead(daemon: Daemon, client: agentfs.Client, ws: agentfs.Workspace) -> None:
    u = urllib.parse.urlsplit(daemon.url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port)
    hdr = {"Authorization": "Bearer " + daemon.token}
    body = json.dumps({"command": "true"}).encode()
    ws.write("4k.bin", os.urandom(4096))

    def raw_exec() -> object:
        conn.request("POST", f"/v1/workspaces/{ws.name}/exec", body=body,
                     headers=dict(hdr, **{"Content-Type": "application/json"}))
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200, data
        return data

    def raw_read() -> object:
        conn.request("GET", f"/v1/workspaces/{ws.name}/files/4k.bin", headers=hdr)
        r = conn.getresponse()
        data = r.read()
        assert r.status == 200 and len(data) == 4096
        return data

    sdk_exec, raw_exec_t = interleave(N, lambda: ws.exec("true"), raw_exec)
    sdk_read, raw_read_t = interleave(N * 2, lambda: ws.read_bytes("4k.bin"), raw_read)
    conn.close()
    lines = [
        f"exec(true)   p50: SDK {p50(sdk_exec):.3f} ms, raw http.client {p50(raw_exec_t):.3f} ms, "
        f"added {p50(sdk_exec) - p50(raw_exec_t):+.3f} ms (n={N})",
        f"4 KiB read   p50: SDK {p50(sdk_read):.3f} ms, raw http.client {p50(raw_read_t):.3f} ms, "
        f"added {p50(sdk_read) - p50(raw_read_t):+.3f} ms (n={2 * N})",
    ]
    print("\n" + "\n".join(lines))
    out = os.environ.get("AGENTFS_BENCH_OUT")
    if out:
        with open(out, "a") as f:
            f.write("\n".join(lines) + "\n")
    # The goal is under 0.3 ms added; fail only on a gross regression (a shared CI machine is noisy).
    assert p50(sdk_read) - p50(raw_read_t) < 2.0
    assert p50(sdk_exec) - p50(raw_exec_t) < 2.0
