"""Agent-core figures: start-up to the first model request, and cairn's CPU per tool call.

Usage: python benchmarks/core_bench.py [--runs 15]

The scripted model server runs in its own process (``python -m cairn.testing.server``) so its
CPU is not counted as cairn's. Figures:

- first request: wall time from spawning ``cairn -p`` to the server receiving the request;
- CPU per tool call: (CPU of a turn with 30 tool calls - CPU of a turn with none) / 30, measured
  in cairn's process with in-process tools (read_file, glob, list_directory), so it includes the
  extra model round trip each call costs (request building, streaming, parsing, recording);
- heavy imports: which of acp / textual / starlette / uvicorn each entry path imports.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("acp", "textual", "starlette", "uvicorn")


def start_server(script: list[dict], record: Path) -> tuple[subprocess.Popen[str], str]:
    script_path = record.with_suffix(".script.json")
    script_path.write_text(json.dumps(script))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cairn.testing.server",
            "--port",
            "0",
            "--script",
            str(script_path),
            "--record",
            str(record),
            "--default-text",
            "ok",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    base_url = process.stdout.readline().strip()
    return process, base_url


def received_times(record: Path) -> list[float]:
    if not record.exists():
        return []
    return [json.loads(line)["received_at"] for line in record.read_text().splitlines() if line]


def run_cairn(env: dict[str, str], cwd: Path, prompt: str) -> tuple[float, float]:
    """(spawn time, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "-p", prompt, "-y"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return started, cpu


def make_env(base_url: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "OPENAI_"))}
    # Measure what an installed cairn does: bytecode cached after the first run (this machine
    # sets PYTHONDONTWRITEBYTECODE, which would recompile every module on every start).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        CAIRN_HOME=str(home),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="bench",
        OPENAI_MODEL="scripted-model",
        CAIRN_DEBUG_LOG_FILE="0",
    )
    return env


def first_request_ms(runs: int, workdir: Path) -> list[float]:
    record = workdir / "first.jsonl"
    server, base_url = start_server([], record)
    project = workdir / "p1"
    (project / ".git").mkdir(parents=True)
    env = make_env(base_url, workdir / "home1")
    try:
        run_cairn(env, project, "warm the bytecode cache")
        samples = []
        for _ in range(runs):
            count = len(received_times(record))
            started, _ = run_cairn(env, project, "hi")
            times = received_times(record)
            samples.append((times[count] - started) * 1000)
        return samples
    finally:
        server.terminate()


TOOL_CALLS_PER_TURN = 30  # many calls per turn so the per-call figure stands above the noise


def tool_call_cpu_ms(runs: int, workdir: Path) -> tuple[list[float], list[float]]:
    """CPU of cairn's own process (the server runs elsewhere) for turns without and with tools."""
    import asyncio

    from cairn.config.loader import Endpoint
    from cairn.config.settings import Settings
    from cairn.session.runtime import Runtime
    from cairn.session.session import PromptRequest

    project = workdir / "p2"
    (project / ".git").mkdir(parents=True)
    (project / "a.py").write_text("print('hello')\n" * 50)

    def call(i: int) -> dict:
        # Arguments vary so loop detection (identical consecutive calls) does not trip.
        return [
            {"name": "read_file", "args": {"file_path": "a.py", "offset": i % 40}},
            {"name": "glob", "args": {"pattern": f"*{i}*.py"}},
            {"name": "list_directory", "args": {"path": ".", "ignore": [f"x{i}"]}},
        ][i % 3]

    turn = [{"tool_calls": [call(i)]} for i in range(TOOL_CALLS_PER_TURN)] + [{"text": "done"}]
    script = []
    for _ in range(runs + 1):
        script += [{"text": "plain"}, *turn]
    record = workdir / "cpu.jsonl"
    server, base_url = start_server(script, record)
    os.environ["CAIRN_HOME"] = str(workdir / "home-cpu")
    os.environ["CAIRN_DEBUG_LOG_FILE"] = "0"

    async def measure() -> tuple[list[float], list[float]]:
        settings = Settings.model_validate({"memory": {"enableManagedAutoMemory": False}})
        runtime = Runtime.from_endpoint(
            cwd=project,
            settings=settings,
            endpoint=Endpoint(base_url, "bench", "scripted-model"),
            record_chats=True,
        )

        async def sink(event: object) -> None:
            return None

        plain, with_tools = [], []
        try:
            for i in range(runs + 1):
                session = runtime.new_session(approval_mode="yolo")
                started = time.process_time()
                await session.prompt(PromptRequest(text="no tools"), sink)
                middle = time.process_time()
                await session.prompt(PromptRequest(text="use tools"), sink)
                ended = time.process_time()
                await session.close()
                if i:  # the first round warms caches and connections
                    plain.append((middle - started) * 1000)
                    with_tools.append((ended - middle) * 1000)
        finally:
            await runtime.aclose()
        return plain, with_tools

    try:
        return asyncio.run(measure())
    finally:
        server.terminate()


def heavy_imports() -> dict[str, list[str]]:
    paths = {
        "cairn -p (headless)": "import cairn.cli.main, cairn.headless.runner, cairn.llm.openai",
        "cairn memory": "import cairn.cli.main, cairn.cli.memory_cmd",
        "cairn --acp": "import cairn.cli.main, cairn.acp",
        "cairn serve": "import cairn.cli.main, cairn.daemon",
        "cairn.sdk": "import cairn.sdk",
    }
    found = {}
    for name, code in paths.items():
        probe = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
        found[name] = (
            [m for m in out.stdout.strip().split(",") if m] if out.returncode == 0 else ["error"]
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        first = first_request_ms(args.runs, workdir)
        plain, tools = tool_call_cpu_ms(max(5, args.runs // 2), workdir)
    per_call = [(t - p) / TOOL_CALLS_PER_TURN for p, t in zip(plain, tools, strict=True)]
    print("| figure | median | p90 | target |")
    print("|---|---|---|---|")
    print(
        f"| `cairn -p` spawn → first model request (ms) | {statistics.median(first):.0f} | "
        f"{sorted(first)[int(len(first) * 0.9) - 1]:.0f} | ≤ 300 |"
    )
    print(f"| CPU of a turn without tools (ms) | {statistics.median(plain):.0f} | | |")
    print(
        f"| CPU of a turn with {TOOL_CALLS_PER_TURN} tool calls (ms) | "
        f"{statistics.median(tools):.0f} | | |"
    )
    print(f"| cairn CPU per tool call (ms) | {statistics.median(per_call):.1f} | | < 5 |")
    print()
    print("| entry path | heavy modules imported |")
    print("|---|---|")
    for name, modules in heavy_imports().items():
        print(f"| {name} | {', '.join(modules) or 'none'} |")


if __name__ == "__main__":
    main()
