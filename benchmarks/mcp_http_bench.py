"""CPU of connecting to MCP servers over streamable HTTP, in one process.

Usage: python benchmarks/mcp_http_bench.py [--runs 7] [--servers 5] [--baseline ../other/src]

Each run is a fresh process (``PYTHONPATH`` = this tree's ``src``, or the baseline's) that loads
the MCP SDK, then connects ``--servers`` connections to one test server on 127.0.0.1
(``tests/mcp/servers/tools_server.py``: initialize, the listings) and calls its ``echo`` tool
once on each; the figure is the process's CPU (every thread: the TLS context's worker included)
from the first connection's start to the last answer, the SDK's import apart. The proxy and CA
variables are removed (certifi's bundle, no proxy), so both trees do the same work but for
their HTTP client. The baseline's runs are interleaved with this tree's; the table gives the
median and the best.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "mcp" / "servers" / "tools_server.py"
_DROPPED = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "CAIRN_PROXY")
PROBE = """
import asyncio, sys, time
from pathlib import Path
from cairn.mcp.config import ServerConfig
from cairn.mcp.connection import McpConnection, load_sdk

url, count = sys.argv[1], int(sys.argv[2])
load_sdk()


async def main() -> None:
    started = time.process_time()
    connections = [
        McpConnection(ServerConfig(f"web{i}", "http", url=url), cwd=Path.cwd())
        for i in range(count)
    ]
    for connection in connections:
        connection.start()
    for connection in connections:
        assert await connection.wait_ready(60), "still connecting"
        assert connection.status == "connected", connection.error
    for connection in connections:
        await connection.call_tool("echo", {"text": "x"}, timeout=30)
    used = time.process_time() - started
    for connection in connections:
        await connection.aclose()
    print(f"{used * 1000:.1f}")


asyncio.run(main())
"""


def _env(src: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in _DROPPED and not name.lower().endswith("_proxy")
    }
    env["PYTHONPATH"] = str(src)
    env["CAIRN_DEBUG_LOG_FILE"] = "0"
    return env


def _run(src: Path, url: str, servers: int, home: Path) -> float:
    env = {**_env(src), "CAIRN_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, url, str(servers)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the probe failed with {src}:\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--servers", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout's src folder")
    options = parser.parse_args()
    from cairn.testing.mcp import FastMCPServer

    trees = {"this tree": ROOT / "src"}
    if options.baseline is not None:
        trees["baseline"] = options.baseline.resolve()
    times: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        server = FastMCPServer(SERVER, env={"MCP_TEST_LOG": str(Path(tmp) / "server.log")})
        with server.serve_http("http") as running:
            for _ in range(options.runs):
                for name, src in trees.items():
                    times[name].append(_run(src, running.url, options.servers, Path(tmp)))
    print(f"CPU of {options.servers} HTTP MCP connections (connect, list, one call each), ms")
    print()
    print("| tree | median | best |")
    print("|---|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.0f} | {min(values):.0f} |")


if __name__ == "__main__":
    main()
