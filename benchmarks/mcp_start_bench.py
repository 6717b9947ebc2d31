"""When ``cairn -p``'s first model request leaves, with a stdio MCP server that needs 4 s to start.

Usage: python benchmarks/mcp_start_bench.py [--runs 5] [--start-seconds 4]

Each run is a real ``cairn -p hi`` against the scripted model server, with one MCP server in the
user's settings that sleeps ``--start-seconds`` before it answers ``initialize`` (an ``npx``
server fetching its package does the like). Timed from the moment the process is spawned to the
moment the scripted server receives the first chat request.

- ``cold``: a fresh ``$CAIRN_HOME``: no tool list of the server is known yet;
- ``warm``: the same ``$CAIRN_HOME`` after one run that saw the server connect: its tool list
  from that start is offered while it starts again;
- ``wait 5 s``: ``mcp.discoveryTimeoutMs: 5000``, the bound the first request waited for servers
  before issue #30 (a cold start);
- ``no server``: the same run without the server: the floor (cairn's own start).

The table gives the median and the best of the runs, and whether the first request offered the
server's tool.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cairn.testing import ScriptedServer, reply

SERVER = r"""
import json, sys, time
time.sleep(float(sys.argv[1]))

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

for line in sys.stdin:
    request = json.loads(line)
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "slow", "version": "0"}}})
    elif method == "tools/list":
        tool = {"name": "lookup", "description": "Look a word up.",
                "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}}}
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [tool]}})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}})
"""
TOOL = "mcp__slow__lookup"


def run_once(
    server: ScriptedServer, home: Path, project: Path, settings: dict
) -> tuple[float, bool]:
    """Seconds from spawn to the first chat request; whether it offered the server's tool."""
    (home / "settings.json").write_text(json.dumps(settings))
    server.requests.clear()
    server.enqueue(reply("ok"), purpose="main")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CAIRN_"))},
        "CAIRN_HOME": str(home),
        "HOME": str(home.parent),
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "bench",
        "OPENAI_MODEL": "scripted-model",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "-p", "hi"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise SystemExit(f"cairn -p failed: {done.stderr}")
    first = server.requests_for("main")[0]
    names = [t["function"]["name"] for t in first.tools]
    return first.received_at - started, TOOL in names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--start-seconds", type=float, default=4.0)
    options = parser.parse_args()
    cases = ("no server", "cold", "warm", "wait 5 s")
    results: dict[str, list[tuple[float, bool]]] = {case: [] for case in cases}
    with tempfile.TemporaryDirectory() as folder, ScriptedServer() as server:
        root = Path(folder)
        script = root / "slow_server.py"
        script.write_text(SERVER)
        entry = {"command": sys.executable, "args": [str(script), str(options.start_seconds)]}
        base = {"memory": {"enableManagedAutoMemory": False}, "mcpServers": {"slow": entry}}
        project = root / "project"
        (project / ".git").mkdir(parents=True)
        for run in range(options.runs):  # interleaved: the load hits every case alike
            for case in results:
                home = root / f"{case.replace(' ', '-')}-{run}" / "cairn-home"
                home.mkdir(parents=True)
                settings = dict(base)
                if case == "no server":
                    del settings["mcpServers"]
                if case == "wait 5 s":
                    settings["mcp"] = {"discoveryTimeoutMs": 5000}
                if case == "warm":  # one start that sees the server connect keeps its tools
                    patient = {**settings, "mcp": {"discoveryTimeoutMs": 60_000}}
                    run_once(server, home, project, patient)
                results[case].append(run_once(server, home, project, settings))
    print(f"load: {os.getloadavg()[0]:.1f} (1 min) · runs: {options.runs}")
    print("| case | first request after (median) | best | its tool in the first request |")
    print("|---|---|---|---|")
    for case, samples in results.items():
        seconds = [s for s, _ in samples]
        offered = sum(o for _, o in samples)
        print(
            f"| {case} | {statistics.median(seconds):.2f} s | {min(seconds):.2f} s "
            f"| {offered} of {len(samples)} |"
        )


if __name__ == "__main__":
    main()
