"""Recall under load: does the fast memory reach the first model request with both cores busy?

Usage (from the repository root)::

    .venv/bin/python benchmarks/recall_load_bench.py                  # 20 turns, 2 busy loops
    .venv/bin/python benchmarks/recall_load_bench.py --burners 0      # the same on an idle machine
    .venv/bin/python benchmarks/recall_load_bench.py --turns 50 --files 10000

Each turn is a real ``cairn -p`` process against the scripted model server (run by this script,
on 127.0.0.1), with managed memory on and ``CAIRN_MEMORY_LOCAL=1``. The project's memory holds
``--files`` synthetic memories (the generator of ``recall_bench.py``; 80 % project, 20 % user
scope) plus one target memory whose body carries a unique marker and which the prompt matches
lexically. The store is indexed once with ``cairn memory reindex``, then one warm-up turn runs
on the idle machine (it writes the bytecode caches: ``PYTHONDONTWRITEBYTECODE`` is removed from
the children's environment). Then ``--burners`` pure-Python busy loops start and the measured
turns run one after another.

The selector answers after ``--selector-delay`` seconds (nothing), far past the first request's
100 ms wait for Recall, so the first request can only carry the fast phase's result. The main
answer is held back a little longer than the selector, so each recall settles and records its
timings (``memory.recall``) before the turn ends.

A turn *hits* when its first ``main`` request contains the marker. Latencies come from cairn's
telemetry (``CAIRN_TELEMETRY_FILE``): ``memory.recall.delivery`` (phase ``fast``) gives the time
from ``begin_recall`` to the fast delivery; ``memory.recall`` gives the fast phase's own timings
(store refresh, then rank + render). "spawn → first request" is measured by this script (process
start to the server receiving the first ``main`` request).

A turn can hit even when its fast delivery comes more than 100 ms after ``begin_recall``: the
fast phase is one step of the recall task, scheduled before the first request's wait starts its
timer, and it publishes without awaiting (``cairn/memory/prefetch.py``), so the timer cannot
expire first. The "more than 100 ms" row counts the turns that a wall-clock 100 ms bound, such as
the reference system's asynchronous scan racing a timer, would have missed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE))

from recall_bench import PoolGenerator, load_corpus, percentile, write_doc  # noqa: E402

from cairn.memory.store.parse import render_memory_file  # noqa: E402
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply  # noqa: E402
from cairn.testing.fixtures import isolated_env  # noqa: E402

if TYPE_CHECKING:
    from cairn.memory.document import MemoryType

CAIRN = str(Path(sys.executable).parent / "cairn")
MARKER = "LOADBENCH-MARKER-4271"  # only in the target memory's body
PROMPT = "how do we rotate the quokka gateway credentials before the release?"
TARGET = render_memory_file(
    "Quokka gateway credential rotation",
    "How we rotate the quokka payment gateway credentials",
    "project",
    f"{MARKER}: rotate with `vault write quokka/rotate`, then restart the gateway pods.\n\n"
    "Why: the old keys expire ninety days after issue.\n"
    "How to apply: before every release that touches payments.",
)
BURNER = "while True:\n    pass\n"  # one core's worth of pure-Python work
DAY = 86_400.0


@dataclass
class Turn:
    hit: bool
    spawn_to_first_request_ms: float
    fast_delivery_ms: float | None  # begin_recall → fast delivery (telemetry)
    scan_ms: float | None  # the fast phase's store refresh (telemetry)
    fast_ms: float | None  # the fast phase's rank + render + publish (telemetry)
    terminal: str  # the handle's terminal delivery event: point or discard reason
    wall_ms: float


@dataclass
class Workspace:
    env: dict[str, str]
    project: Path
    telemetry: Path
    turns: list[Turn] = field(default_factory=list)


def model(selector_delay: float, main_delay: float) -> Any:
    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "recall-selector":
            return Reply(text='{"selected_memories": []}', delay=selector_delay)
        if request.purpose == "main":
            return Reply(text="Rotate with vault, then restart the pods.", delay=main_delay)
        return reply("Nothing to save.")  # Extract (and Dream) after the turn

    return handle


def workspace(root: Path, server: ScriptedServer) -> Workspace:
    env = isolated_env(server.base_url, root)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # children write and reuse bytecode caches
    telemetry = root / "telemetry.jsonl"
    env.update(CAIRN_MEMORY_LOCAL="1", CAIRN_TELEMETRY_FILE=str(telemetry))
    project = root / "project"
    (project / ".git").mkdir(parents=True)
    settings = project / ".cairn" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"memory": {"enableManagedAutoMemory": True}}))
    return Workspace(env, project, telemetry)


def seed(space: Workspace, files: int) -> None:
    """``files`` synthetic memories plus the target, then ``cairn memory reindex``."""
    project_root = space.project / ".cairn" / "memory"
    user_root = Path(space.env["CAIRN_HOME"]) / "memories"
    generator = PoolGenerator(load_corpus(), seed=files)
    rng = random.Random(files)
    now = time.time()
    for number in range(files):
        relative, memory_type, name, description, body = generator.doc(number)
        root = project_root if number % 5 else user_root
        text = render_memory_file(name, description, cast("MemoryType", memory_type), body)
        write_doc(root, relative, text, now - rng.uniform(0, 400) * DAY)
    write_doc(project_root, "project/quokka-gateway-credentials.md", TARGET, now - 30 * DAY)
    subprocess.run(
        [CAIRN, "memory", "reindex"],
        env=space.env,
        cwd=space.project,
        check=True,
        capture_output=True,
    )


def telemetry_since(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    if not path.exists():
        return [], offset
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    events = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    return events, offset + len(data)


def run_turn(space: Workspace, server: ScriptedServer, offset: int) -> tuple[Turn, int]:
    mark = len(server.requests)
    started = time.time()
    done = subprocess.run(
        [CAIRN, "-p", PROMPT],
        env=space.env,
        cwd=space.project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    wall_ms = (time.time() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"cairn -p failed ({done.returncode}):\n{done.stderr}")
    mains = [r for r in server.requests[mark:] if r.purpose == "main"]
    if not mains:
        raise SystemExit("no main request was received")
    first = mains[0]
    events, offset = telemetry_since(space.telemetry, offset)
    deliveries = [e for e in events if e["event"] == "memory.recall.delivery"]
    fast = [e for e in deliveries if e["phase"] == "fast"]
    recalls = [e for e in events if e["event"] == "memory.recall"]
    terminal = [e for e in deliveries if e["phase"] == "refined"]
    turn = Turn(
        hit=first.contains(MARKER),
        spawn_to_first_request_ms=(first.received_at - started) * 1000,
        fast_delivery_ms=fast[0]["latency_ms"] if fast else None,
        scan_ms=recalls[0]["scan_duration_ms"] if recalls else None,
        fast_ms=recalls[0]["fast_duration_ms"] if recalls else None,
        terminal=(terminal[0]["discard_reason"] or terminal[0]["delivery_point"])
        if terminal
        else "none",
        wall_ms=wall_ms,
    )
    return turn, offset


def start_burners(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(count)]


def stop_burners(burners: Sequence[subprocess.Popen[bytes]]) -> None:
    for burner in burners:
        burner.terminate()
    for burner in burners:
        burner.wait(timeout=10)


def p50_p95_max(values: Sequence[float | None]) -> str:
    known = [value for value in values if value is not None]
    if not known:
        return "–"
    text = f"{percentile(known, 0.5):.1f} / {percentile(known, 0.95):.1f} / {max(known):.1f}"
    missing = len(values) - len(known)
    return text + (f" ({len(known)} of {len(values)})" if missing else "")


def print_report(args: argparse.Namespace, turns: Sequence[Turn], loads: Sequence[float]) -> None:
    hits = sum(turn.hit for turn in turns)
    terminals: dict[str, int] = {}
    for turn in turns:
        terminals[turn.terminal] = terminals.get(turn.terminal, 0) + 1
    print(
        f"\n## Recall under load: {args.burners} busy loop(s) on {os.cpu_count()} CPUs, "
        f"{args.files:,} memory files + the target, selector {args.selector_delay:g} s\n"
    )
    print(f"load average during the turns: {min(loads):.2f}–{max(loads):.2f}\n")
    print("| figure | value |")
    print("|---|---|")
    print(f"| turns | {len(turns)} |")
    print(f"| **fast memory in the first model request** | **{hits} / {len(turns)}** |")
    late = sum(1 for t in turns if t.fast_delivery_ms is not None and t.fast_delivery_ms > 100)
    print(f"| of which delivered more than 100 ms after begin_recall | {late} |")
    rows: dict[str, list[float | None]] = {
        "begin_recall → fast delivery ms p50 / p95 / max": [t.fast_delivery_ms for t in turns],
        "fast phase: store refresh ms p50 / p95 / max": [t.scan_ms for t in turns],
        "fast phase: rank + render + publish ms p50 / p95 / max": [t.fast_ms for t in turns],
        "spawn → first model request ms p50 / p95 / max": [
            t.spawn_to_first_request_ms for t in turns
        ],
        "whole turn (process) ms p50 / p95 / max": [t.wall_ms for t in turns],
    }
    for label, values in rows.items():
        print(f"| {label} | {p50_p95_max(values)} |")
    ends = ", ".join(f"{name} {count}" for name, count in sorted(terminals.items()))
    print(f"| terminal delivery events | {ends} |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--burners", type=int, default=2, help="busy-loop processes")
    parser.add_argument("--files", type=int, default=1000, help="synthetic memory files")
    parser.add_argument("--selector-delay", type=float, default=2.0, help="seconds")
    args = parser.parse_args(argv)
    main_delay = args.selector_delay + 0.3  # the recall settles (and reports) before the turn ends

    with tempfile.TemporaryDirectory(prefix="cairn-load-") as tmp, ScriptedServer() as server:
        server.handler = model(args.selector_delay, main_delay)
        space = workspace(Path(tmp), server)
        seed(space, args.files)
        warm_up, offset = run_turn(space, server, 0)
        if not warm_up.hit:
            raise SystemExit("the target is not in the first request even on an idle machine")
        print(f"warm-up turn: {warm_up}", file=sys.stderr)
        burners = start_burners(args.burners)
        loads: list[float] = []
        try:
            time.sleep(1.0)  # the busy loops are running before the first turn
            for number in range(args.turns):
                turn, offset = run_turn(space, server, offset)
                loads.append(os.getloadavg()[0])
                space.turns.append(turn)
                print(f"turn {number + 1}: {turn}", file=sys.stderr)
        finally:
            stop_burners(burners)
        print_report(args, space.turns, loads)


if __name__ == "__main__":
    main()
