"""Recap figures: what the daemon's recap route adds over the model, and what the filter saves.

Usage: python benchmarks/recap_bench.py [--calls 20] [--short 10] [--long 500]

- route overhead: a real ``cairn serve`` (default flags) and an instantly answering scripted
  model, each in its own process. For a session with ``--short`` and one with ``--long`` history
  messages, ``POST /session/{id}/recap`` is timed ``--calls`` times; the model's own time is the
  same recap request (replayed from the server's record) sent straight to the model server,
  alternately with the route calls. Overhead = median of (route time - model time) per pair.
- dialog filter: a tool-heavy session (10 turns, 3 ``read_file`` calls of an 8 KB file each) is
  built in process; the recap's input tokens are counted with the filter (the recap request as
  sent) and without it (the whole history plus the recap instruction), 4 characters a token as
  the scripted server estimates them.
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

import httpx

from cairn.sdk import DaemonClient

sys.path.insert(0, str(Path(__file__).parent))
from daemon_bench import environment, free_port, health_ok, make_project

CHARS_PER_TOKEN = 4  # the scripted server's usage estimate
FILE_BYTES = 8 * 1024  # size of each file the tool-heavy session reads
RECAP_TEXT = "<recap>Benchmarking the recap route. Next: read the numbers.</recap>"


def start_model_server(record: Path) -> tuple[subprocess.Popen[str], str]:
    script = record.with_suffix(".script.json")
    script.write_text(json.dumps({"default": {"text": RECAP_TEXT}}))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cairn.testing.server",
            "--port",
            "0",
            "--script",
            str(script),
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def session_with_history(client: DaemonClient, messages: int) -> str:
    info = await client.create_session()
    for n in range(messages // 2):  # each turn adds a user and a model message
        await client.prompt_and_wait(info.session_id, f"step {n}: keep going")
    return info.session_id


def last_recap_body(record: Path) -> dict[str, object]:
    lines = [json.loads(line) for line in record.read_text().splitlines() if line]
    return next(r["body"] for r in reversed(lines) if r["purpose"] == "recap")


async def time_model_once(http: httpx.AsyncClient, base_url: str, body: dict[str, object]) -> float:
    headers = {"X-Cairn-Purpose": "recap-direct", "Authorization": "Bearer bench"}
    started = time.perf_counter()
    async with http.stream("POST", base_url + "/chat/completions", json=body, headers=headers) as r:
        await r.aread()
    return time.perf_counter() - started


async def overhead(
    url: str, base_url: str, record: Path, size: int, calls: int
) -> dict[str, float]:
    """Route and model timed alternately, so a busy machine slows both alike."""
    route: list[float] = []
    model: list[float] = []
    async with (
        DaemonClient(url, timeout=120) as client,
        httpx.AsyncClient(trust_env=False, verify=False) as http,  # noqa: S501 - loopback
    ):
        session_id = await session_with_history(client, size)
        await client.recap_session(session_id)  # warm up both connections
        body = last_recap_body(record)
        await time_model_once(http, base_url, body)
        for _ in range(calls):
            started = time.perf_counter()
            assert await client.recap_session(session_id) is not None
            route.append(time.perf_counter() - started)
            model.append(await time_model_once(http, base_url, body))
    extra = [r - m for r, m in zip(route, model, strict=True)]
    return {
        "route": statistics.median(route),
        "model": statistics.median(model),
        "overhead": statistics.median(extra),
    }


def route_figures(calls: int, sizes: list[int]) -> dict[int, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        record = root / "requests.jsonl"
        model, base_url = start_model_server(record)
        project = make_project(root, memory=False)
        port = free_port()
        daemon = subprocess.Popen(
            [sys.executable, "-m", "cairn.cli.main", "serve", "--port", str(port)],
            cwd=project,
            env=environment(base_url, root),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while not health_ok(port):
                time.sleep(0.01)
            url = f"http://127.0.0.1:{port}"
            return {
                size: asyncio.run(overhead(url, base_url, record, size, calls)) for size in sizes
            }
        finally:
            daemon.terminate()
            daemon.wait(15)
            model.terminate()
            model.wait()


async def filter_figures() -> tuple[int, int, int]:
    """(history messages, tokens without the filter, tokens with it) for a tool-heavy session."""
    from cairn.config.loader import Endpoint
    from cairn.config.settings import Settings
    from cairn.llm.openai import to_openai_messages
    from cairn.recap.service import RECAP_SYSTEM_PROMPT, RECAP_USER_PROMPT, recap_messages
    from cairn.session.runtime import Runtime
    from cairn.session.session import PromptRequest
    from cairn.testing import ScriptedServer, ToolCallSpec, reply, tool_calls
    from cairn.vocabulary.events import SessionEvent

    async def ignore(event: SessionEvent) -> None:
        return None

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["CAIRN_HOME"] = str(root / "cairn-home")
        project = root / "project"
        project.mkdir()
        for n in range(3):
            (project / f"module{n}.py").write_text(("x = 1  # padding\n" * 600)[:FILE_BYTES])
        async with ScriptedServer() as server:
            settings = Settings()
            settings.memory.enable_managed_auto_memory = False
            runtime = Runtime.from_endpoint(
                cwd=project,
                settings=settings,
                endpoint=Endpoint(server.base_url, "bench", "scripted-model"),
            )
            session = runtime.new_session(approval_mode="yolo")
            for turn in range(10):
                calls = [
                    ToolCallSpec("read_file", {"file_path": f"module{n}.py"}) for n in range(3)
                ]
                server.enqueue(tool_calls(*calls), purpose="main")
                server.enqueue(reply(f"Read the modules for step {turn}."), purpose="main")
                await session.prompt(PromptRequest(f"step {turn}: read the modules"), ignore)
            history = session.history
            await session.close()
            await runtime.aclose()
    unfiltered = to_openai_messages(RECAP_SYSTEM_PROMPT, [*history, *recap_messages(history)[-1:]])
    filtered = to_openai_messages(RECAP_SYSTEM_PROMPT, recap_messages(history))
    del RECAP_USER_PROMPT
    return (
        len(history),
        len(json.dumps(unfiltered)) // CHARS_PER_TOKEN,
        len(json.dumps(filtered)) // CHARS_PER_TOKEN,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=500)
    args = parser.parse_args()

    figures = route_figures(args.calls, [args.short, args.long])
    messages, without, with_filter = asyncio.run(filter_figures())

    print("| figure | cairn | target |")
    print("|---|---|---|")
    for size, f in figures.items():
        extra = f["overhead"] * 1000
        print(
            f"| recap route, {size} history messages: route / model / overhead (median of "
            f"{args.calls}) | {f['route'] * 1000:.1f} / {f['model'] * 1000:.1f} / "
            f"{extra:.1f} ms | overhead ≤ 5 ms |"
        )
    print(
        f"| recap input tokens, tool-heavy session ({messages} history entries): without / "
        f"with the dialog filter | {without} / {with_filter} "
        f"({100 * (1 - with_filter / without):.0f} % fewer) | – |"
    )


if __name__ == "__main__":
    main()
