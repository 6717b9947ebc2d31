"""Reading what a stdio MCP server sends: one large tool result, and a flood of list changes.

Usage: python benchmarks/mcp_read_bench.py [--runs 3] [--sizes 10,25,50] [--baseline SRC]

Each case runs in a child process of its own (``--baseline SRC`` runs it again with that
checkout's ``src`` first on ``PYTHONPATH``): one ``McpConnection`` to a hand-written stdio
server, one ``tools/call``, timed from the call to its result, while a task ticking every 10 ms
records the longest the event loop kept it waiting (what a daemon's other sessions would wait).

- ``result N MB``: the tool's answer is one text of N MB on one JSON-RPC line;
- ``flood``: the server sends 20,000 ``notifications/tools/list_changed`` before answering; the
  table also says how many ``tools/list`` requests the server then received.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVER = r"""
import json, os, sys
MODE, SIZE, LOG = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    request = json.loads(line)
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        continue
    with open(LOG, "a") as out:
        out.write(method + "\n")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "bench", "version": "0"}}})
    elif method == "tools/list":
        tool = {"name": "read", "description": "d", "inputSchema": {"type": "object"}}
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [tool]}})
    elif method == "tools/call":
        if MODE == "flood":
            changed = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            sys.stdout.write((changed + "\n") * 20000)
            text = "flooded"
        else:
            text = "x" * (SIZE * 1024 * 1024)
        send({"jsonrpc": "2.0", "id": ident,
              "result": {"content": [{"type": "text", "text": text}]}})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}})
"""


async def _child(mode: str, size: int, folder: Path) -> dict[str, float]:
    from cairn.mcp.config import ServerConfig
    from cairn.mcp.connection import McpConnection

    script, log = folder / "server.py", folder / "server.log"
    script.write_text(SERVER)
    args = (str(script), mode, str(size), str(log))
    connection = McpConnection(
        ServerConfig("bench", "stdio", command=sys.executable, args=args), cwd=folder
    )
    connection.start()
    assert await connection.wait_ready(60), connection.error
    lag = 0.0
    running = True

    async def tick() -> None:
        nonlocal lag
        while running:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            lag = max(lag, time.perf_counter() - before - 0.01)

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.05)
    start = time.perf_counter()
    await connection.call_tool("read", {}, timeout=600)
    seconds = time.perf_counter() - start
    running = False
    await ticker
    await connection.aclose()
    lists = log.read_text().splitlines().count("tools/list") - 1  # less the one at start
    return {"seconds": seconds, "lag": lag, "lists": lists}


def run_case(mode: str, size: int, src: Path | None) -> dict[str, float]:
    env = dict(os.environ, CAIRN_DEBUG_LOG_FILE="0")
    if src is not None:
        env["PYTHONPATH"] = str(src)
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [sys.executable, __file__, "--child", mode, str(size), folder],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="10,25,50")
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--child", nargs=3, metavar=("MODE", "SIZE", "FOLDER"))
    options = parser.parse_args()
    if options.child:
        mode, size, folder = options.child
        print(json.dumps(asyncio.run(_child(mode, int(size), Path(folder)))))
        return
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if options.baseline is not None:
        trees.append(("baseline", options.baseline))
    cases = [("result", int(s)) for s in options.sizes.split(",")] + [("flood", 0)]
    samples: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    for _ in range(options.runs):  # interleaved: the load hits every case alike
        for mode, size in cases:
            for label, src in trees:
                samples.setdefault((label, mode, size), []).append(run_case(mode, size, src))
    print("| case | tree | call → result (median) | longest event-loop wait (median) | lists |")
    print("|---|---|---|---|---|")
    for mode, size in cases:
        for label, _ in trees:
            runs = samples[(label, mode, size)]
            name = f"result {size} MB" if mode == "result" else "20,000 list_changed"
            seconds = statistics.median(r["seconds"] for r in runs)
            lag = statistics.median(r["lag"] for r in runs) * 1000
            lists = statistics.median(r["lists"] for r in runs)
            print(f"| {name} | {label} | {seconds:.2f} s | {lag:.0f} ms | {lists:.0f} |")


if __name__ == "__main__":
    main()
