"""MCP figures: start-up with servers, one MCP tool round trip, idle RSS of a daemon with servers.

Usage: python benchmarks/mcp_bench.py [--runs 9] [--sessions 10] [--baseline SRC]

The scripted model server runs in its own process (``python -m cairn.testing.server``) and
records when each request arrived. The MCP servers are FastMCP scripts run the way a user's are
(``python -m cairn.testing.mcp SCRIPT`` over stdio). Figures:

- spawn → first model request of ``cairn -p`` with 0 MCP servers and with 3 stdio servers
  (FastMCP, nothing to do at start): the 3-server case includes their start and discovery,
  which the first request waits for (bounded by ``mcp.discoveryTimeoutMs``). ``--baseline SRC``
  adds the 0-server case of another checkout's ``src`` (e.g. main before MCP). Interleaved.
- round trip of one tool call: from the request whose answer is the tool call arriving at the
  model server to the next request arriving (cairn runs the tool and sends the result), for an
  MCP tool returning N bytes and for ``read_file`` of an N-byte file, in one ``cairn -p`` turn
  of 10 calls each, interleaved.
- idle RSS of ``cairn serve`` with 10 sessions each holding one stdio server (connected), and
  with 10 sessions and no servers; the servers' own RSS is listed apart.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from core_bench import make_env, received, start_server  # the scripted model server, shared

RESULT_BYTES = 2000  # the size of one tool result in the round-trip case
CALLS_PER_TURN = 10
BENCH_SERVER = '''
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

app = FastMCP("bench")

@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def blob(size: int, tag: int = 0) -> str:
    """Return size bytes (``tag`` makes each call distinct for loop detection)."""
    return "x" * size
'''


class Case:
    """One configuration: a project folder and a cairn home whose user settings name the
    servers (user settings need no trusted folder), optionally another checkout's ``src``."""

    def __init__(
        self, folder: Path, url: str, servers: dict[str, Any], src: Path | None = None
    ) -> None:
        self.folder = folder / "project"
        (self.folder / ".git").mkdir(parents=True)
        home = folder / "home"
        home.mkdir()
        settings = {"memory": {"enableManagedAutoMemory": False}, "mcpServers": servers}
        (home / "settings.json").write_text(json.dumps(settings))
        self.env = make_env(url, home)
        if src is not None:
            self.env["PYTHONPATH"] = str(src)

    def run(self, prompt: str) -> float:
        """``cairn -p PROMPT``; the time it was spawned."""
        started = time.time()
        subprocess.run(
            [sys.executable, "-m", "cairn.cli.main", "-p", prompt, "-y"],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return started


def stdio_entry(script: Path) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "cairn.testing.mcp", str(script)],
        "trust": True,
    }


def first_request(
    runs: int, work: Path, script: Path, baseline: Path | None
) -> dict[str, list[float]]:
    record = work / "first.jsonl"
    server, url = start_server([], record)
    cases = {"0 MCP servers": Case(work / "p0", url, {})}
    if baseline is not None:
        cases = {"0 MCP servers, baseline": Case(work / "pb", url, {}, baseline), **cases}
    three = {f"s{i}": stdio_entry(script) for i in range(3)}
    cases["3 stdio MCP servers"] = Case(work / "p3", url, three)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for case in cases.values():
            case.run("warm the bytecode cache")
        for _ in range(runs):
            for name, case in cases.items():
                count = len(received(record))
                started = case.run("hello")
                first = received(record)[count]
                samples[name].append((first["received_at"] - started) * 1000)
    finally:
        server.terminate()
    return samples


def round_trip(runs: int, work: Path, script: Path) -> dict[str, list[float]]:
    calls = {
        "MCP tool (mcp__bench__blob)": lambda i: {
            "name": "mcp__bench__blob",
            "args": {"size": RESULT_BYTES, "tag": i},
        },
        "built-in read_file": lambda i: {
            "name": "read_file",
            "args": {"file_path": f"blob{i}.txt"},
        },
    }
    order = [name for _ in range(runs + 1) for name in calls]  # the first pair warms up
    replies: list[dict[str, Any]] = []
    for name in order:
        replies += [{"tool_calls": [calls[name](i)]} for i in range(CALLS_PER_TURN)]
        replies.append({"text": "done"})
    record = work / "rt.jsonl"
    server, url = start_server(replies, record)
    case = Case(work / "rt", url, {"bench": stdio_entry(script)})
    for i in range(CALLS_PER_TURN):  # distinct calls: ten identical ones trip loop detection
        (case.folder / f"blob{i}.txt").write_text("x" * (RESULT_BYTES - 1) + "\n")
    samples: dict[str, list[float]] = {name: [] for name in calls}
    try:
        for index, name in enumerate(order):
            count = len(received(record))
            case.run("call it")
            turn = [r for r in received(record)[count:] if r["purpose"] == "main"]
            gaps = [
                (b["received_at"] - a["received_at"]) * 1000 for a, b in itertools.pairwise(turn)
            ]
            if index >= len(calls):
                samples[name] += gaps
    finally:
        server.terminate()
    return samples


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def settled_rss(pid: int, servers: int) -> tuple[int, int]:
    """(RSS of ``pid``, total RSS of its children) once there are ``servers`` children and
    neither figure moved by more than 1 % in a second (servers initialised, sessions idle)."""
    deadline = time.monotonic() + 120
    last = (0, 0)
    while True:
        time.sleep(1)
        kids = children(pid)
        now = (rss_kib(pid), sum(rss_kib(kid) for kid in kids))
        steady = all(abs(a - b) <= 0.01 * max(a, 1) for a, b in zip(now, last, strict=True))
        if (len(kids) >= servers and steady) or time.monotonic() > deadline:
            return now
        last = now


def daemon_rss(sessions: int, work: Path, script: Path, with_servers: bool) -> tuple[int, int]:
    """(RSS of cairn serve, total RSS of its MCP server children), in KiB, once idle."""
    record = work / f"d{int(with_servers)}.jsonl"
    model, url = start_server([], record)
    case = Case(work / f"d{int(with_servers)}", url, {})
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cairn.cli.main",
            "serve",
            "--port",
            "0",
            "--max-sessions",
            str(sessions + 1),
        ],
        cwd=case.folder,
        env=case.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert serve.stdout is not None
        base = serve.stdout.readline().split("listening on ")[1].split()[0]
        entry = {
            "name": "bench",
            "command": sys.executable,
            "args": ["-m", "cairn.testing.mcp", str(script)],
            "env": [],
        }
        for _ in range(sessions):
            body = json.dumps({"mcpServers": [entry] if with_servers else []}).encode()
            request = urllib.request.Request(  # noqa: S310 - the daemon on 127.0.0.1
                f"{base}/session", data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                answer.read()
        return settled_rss(serve.pid, sessions if with_servers else 0)
    finally:
        serve.terminate()
        serve.wait(30)
        model.terminate()


def row(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return f"| {name} | {statistics.median(values):.0f} ms | {ordered[0]:.0f} ms | {p90:.0f} ms |"


def ratios(samples: dict[str, list[float]]) -> str:
    """Each case's median over the first case's (the reference), measured in the same run."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    reference, base = next(iter(medians.items()))
    others = [f"{name} / {reference}: {m / base:.2f}" for name, m in medians.items()]
    return "\nratios of medians: " + "; ".join(others[1:]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument(
        "--baseline", type=Path, help="the src folder of another checkout (0-server case)"
    )
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        script = work / "bench_server.py"
        script.write_text(BENCH_SERVER)
        first = first_request(options.runs, work, script, options.baseline)
        print("| spawn → first model request | median | min | p90 |\n|---|---|---|---|")
        for name, values in first.items():
            print(row(name, values))
        print(ratios(first))
        trips = round_trip(options.runs, work, script)
        print(
            f"\n| one tool call, {RESULT_BYTES} B result | median | min | p90 |\n|---|---|---|---|"
        )
        for name, values in trips.items():
            print(row(name, values))
        print(ratios(trips))
        print(
            f"\n| cairn serve, {options.sessions} idle sessions | cairn serve RSS | "
            "MCP servers' RSS (total) |\n|---|---|---|"
        )
        for with_servers in (False, True):
            own, servers = daemon_rss(options.sessions, work, script, with_servers)
            label = "each with one stdio MCP server" if with_servers else "no MCP servers"
            print(f"| {label} | {own / 1024:.0f} MiB | {servers / 1024:.0f} MiB |")


if __name__ == "__main__":
    main()
