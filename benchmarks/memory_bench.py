"""Extract and Dream: turns never wait for them, and processes sharing a root lose nothing.

Usage (from the repository root)::

    .venv/bin/python benchmarks/memory_bench.py                  # both figures
    .venv/bin/python benchmarks/memory_bench.py --turns 30       # (a) only, more turns
    .venv/bin/python benchmarks/memory_bench.py --processes 8 --rounds 20 --skip-turns

(a) Turn latency: ACP/daemon-style turns (``Session.prompt`` on a ``Runtime``, no drain) against
the scripted model server, whose main answers take ``--main-delay`` seconds and whose extraction
answers take 5 s; median turn time with managed memory on (Recall + scheduled Extract and Dream)
over the same with memory off. (b) Many processes extracting into one memory root
(``tests/e2e/memory_worker.py``: each round writes a new memory and inserts a line into one
shared memory with ``edit``): lost or torn files, lost lines of the shared memory, missing
index lines, leftover temp files, and wall time.

The README next to this file records the figures, the command and the machine.
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
from typing import Any

HERE = Path(__file__).resolve().parent
WORKER = HERE.parent / "tests" / "e2e" / "memory_worker.py"
EXTRACT_DELAY = 5.0  # seconds the scripted model takes to answer an extraction request
SEEDED_MEMORIES = 50  # memories in the project, so Recall has work to do


# --- (a) turn latency ----------------------------------------------------------------------


def _seed(root: Path) -> None:
    for i in range(SEEDED_MEMORIES):
        path = root / "project" / f"fact-{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\nname: Fact {i}\ndescription: deploy step {i} of the billing service\n"
            f"type: project\n---\n\nBilling deploy step {i}: run make release-{i}.\n"
        )


async def _turns(
    base: Path, memory_on: bool, turns: int, main_delay: float, *, tasks: bool = True
) -> list[float]:
    from cairn.config.loader import Endpoint
    from cairn.config.settings import Settings
    from cairn.llm.openai import OpenAIProvider
    from cairn.session.runtime import Runtime
    from cairn.session.session import PromptRequest
    from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply
    from cairn.vocabulary.events import SessionEvent

    def answer(request: RecordedRequest) -> Reply:
        if request.purpose in ("extract", "dream"):
            return reply("Nothing to save.", delay=EXTRACT_DELAY)
        if request.purpose == "recall-selector":
            return reply('{"selected_memories": []}')
        return reply("Done.", delay=main_delay)

    workspace = base / ("off" if not memory_on else "on" if tasks else "recall-only")
    (workspace / ".git").mkdir(parents=True)
    async with ScriptedServer(handler=answer) as server:
        settings = Settings.model_validate(
            {"memory": {"enableManagedAutoMemory": memory_on, "minAvailableMemoryMb": 0}}
        )
        provider = OpenAIProvider(base_url=server.base_url, api_key="k", model="m", timeout=60)
        runtime = Runtime(
            cwd=workspace,
            settings=settings,
            provider=provider,
            endpoint=Endpoint(server.base_url, "k", "m"),
            record_chats=False,
        )
        if memory_on:
            manager = runtime.memory_manager()
            root = manager.roots.project
            assert root is not None
            _seed(root)
            if not tasks:  # diagnostic: Recall alone, Extract and Dream never scheduled
                manager.schedule_extract = lambda **_: None  # type: ignore[method-assign]
                manager.schedule_dream = lambda **_: None  # type: ignore[method-assign]
        session = runtime.new_session()

        async def sink(event: SessionEvent) -> None:
            return None

        times: list[float] = []
        try:
            for turn in range(turns):
                started = time.perf_counter()
                result = await session.prompt(
                    PromptRequest(f"How do we deploy billing, step {turn}? I prefer tabs."), sink
                )
                times.append(time.perf_counter() - started)
                assert result.stop_reason == "end_turn", result.error
            extracting = len(server.requests_for("extract"))
        finally:
            await runtime.aclose()  # never drains: pending extraction is cancelled
    if memory_on and tasks:
        print(f"  memory on: {extracting} extraction request(s) were in flight during the turns")
    return times


def turn_latency(turns: int, main_delay: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cairn-memory-bench-") as folder:
        base = Path(folder)
        os.environ["CAIRN_HOME"] = str(base / "home")
        for name in ("CAIRN_MEMORY_LOCAL", "CAIRN_MEMORY_BASE_DIR"):
            os.environ.pop(name, None)
        off = asyncio.run(_turns(base, False, turns, main_delay))
        recall_only = asyncio.run(_turns(base, True, turns, main_delay, tasks=False))
        on = asyncio.run(_turns(base, True, turns, main_delay))
    return {
        "off_ms": statistics.median(off) * 1000,
        "recall_only_ms": statistics.median(recall_only) * 1000,
        "on_ms": statistics.median(on) * 1000,
        "on_max_ms": max(on) * 1000,
        "on_max_turn": on.index(max(on)) + 1,
        "ratio": statistics.median(on) / statistics.median(off),
        "tasks_ratio": statistics.median(on) / statistics.median(recall_only),
    }


# --- (b) many processes, one root --------------------------------------------------------


def _audit(root: Path, processes: int, rounds: int) -> dict[str, int]:
    sys.path.insert(0, str(WORKER.parent))
    from memory_worker import audit  # type: ignore[import-not-found]

    return dict(audit(root, processes, rounds))


def shared_root(processes: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cairn-memory-procs-") as folder:
        base = Path(folder)
        project = base / "project"
        (project / ".git").mkdir(parents=True)
        env = {**os.environ, "CAIRN_HOME": str(base / "home")}
        for name in ("CAIRN_MEMORY_LOCAL", "CAIRN_MEMORY_BASE_DIR"):
            env.pop(name, None)
        sys.path.insert(0, str(WORKER.parent))
        from memory_worker import SHARED_LOG, shared_log_text  # type: ignore[import-not-found]

        from cairn.memory.paths import memory_roots

        root = memory_roots(project, environ=env).project
        assert root is not None
        (root / SHARED_LOG).parent.mkdir(parents=True)
        (root / SHARED_LOG).write_text(shared_log_text())
        started = time.perf_counter()
        children = [
            subprocess.Popen(
                [sys.executable, str(WORKER), str(project), str(w), str(rounds)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for w in range(processes)
        ]
        results = [json.loads(child.communicate(timeout=600)[0]) for child in children]
        wall = time.perf_counter() - started
        audit = _audit(root, processes, rounds)
        trail = (root / ".history.jsonl").read_text().splitlines()
    return {
        "wall_s": wall,
        "completed": sum(r["completed"] for r in results),
        "expected": processes * rounds,
        "worker_s_median": statistics.median(r["seconds"] for r in results),
        "audit_lines": len(trail),
        **audit,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--main-delay", type=float, default=0.2)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--skip-turns", action="store_true")
    parser.add_argument("--skip-processes", action="store_true")
    args = parser.parse_args()

    if not args.skip_turns:
        print(f"(a) {args.turns} turns per mode, main answer {args.main_delay * 1000:.0f} ms, "
              f"extraction answer {EXTRACT_DELAY:.0f} s")  # fmt: skip
        figures = turn_latency(args.turns, args.main_delay)
        print("| figure | value | target |\n|---|---|---|")
        print(f"| turn, memory off (median) | {figures['off_ms']:.1f} ms | – |")
        print(f"| turn, memory on, Recall only (median) | {figures['recall_only_ms']:.1f} ms | – |")
        print(f"| turn, memory on (median) | {figures['on_ms']:.1f} ms | – |")
        print(f"| turn, memory on (max: turn {figures['on_max_turn']:.0f}) "
              f"| {figures['on_max_ms']:.1f} ms | – |")  # fmt: skip
        print(f"| ratio on / off | {figures['ratio']:.3f} | ≤ 1.05 |")
        tasks_ratio = figures["tasks_ratio"]
        print(f"| ratio on / Recall only (Extract + Dream alone) | {tasks_ratio:.3f} | – |")
    if not args.skip_processes:
        print(f"\n(b) {args.processes} processes × {args.rounds} rounds into one memory root")
        shared = shared_root(args.processes, args.rounds)
        print("| figure | value | target |\n|---|---|---|")
        print(f"| extractions completed | {shared['completed']} / {shared['expected']} | all |")
        for key in ("lost_files", "corrupt_files", "lost_log_lines", "duplicate_log_lines",
                    "missing_index_lines", "temp_files"):  # fmt: skip
            print(f"| {key.replace('_', ' ')} | {shared[key]} | 0 |")
        print(f"| audit lines | {shared['audit_lines']} | {shared['expected']} |")
        print(f"| wall time | {shared['wall_s']:.1f} s | – |")
        print(f"| per-process time (median) | {shared['worker_s_median']:.1f} s | – |")


if __name__ == "__main__":
    main()
