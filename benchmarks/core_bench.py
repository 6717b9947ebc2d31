"""Agent-core figures: start-up to the first model request, and cairn's CPU per tool call.

Usage: python benchmarks/core_bench.py [--runs 15] [--baseline ../other/src] [--instructions]
       [--by-module 40] [--request-cpu] [--tool-instructions]

The scripted model server runs in its own process (``python -m cairn.testing.server``) so its
CPU is not counted as cairn's. Figures:

- first request: wall time from spawning ``cairn -p`` to the server receiving the model request,
  with managed memory off, on (the default) in a project with no memories yet, and on in a
  project with 200 indexed memories that the prompt matches (Recall's fast phase then ranks and
  renders before the request leaves). The three cases run interleaved, so load on the machine
  affects them alike; with each run's CPU time (``cairn -p``'s whole process, spawn → exit);
- CPU per tool call: (CPU of a turn with 30 tool calls - CPU of a turn with none) / 30, measured
  in cairn's process with in-process tools (read_file, glob, list_directory), so it includes the
  extra model round trip each call costs (request building, streaming, parsing, recording);
- heavy imports: which of acp / textual / starlette / uvicorn / typer each entry path imports.

``--baseline ../other/src`` adds the start-up of another checkout, interleaved with this one's,
so before/after figures come from one run under the same load. ``--instructions`` also counts,
with valgrind, the CPU instructions each case executes until its first request: a figure that
does not move with the load of a shared machine (wall and CPU times here move by ±30 %). The
debug log is on, as for a user (``CAIRN_DEBUG_LOG_FILE`` unset).

``--request-cpu`` times the CPU of one model request in a process of its own (the provider
against the scripted server on a warm connection, :data:`REQUEST_PROBE`), with the baseline's
runs interleaved.

``--tool-instructions`` (valgrind) counts the instructions of the tool-call turn instead of its CPU
time: (instructions of the turn with tools - those of the turn without) / 30, for this tree and,
with ``--baseline``, the other one (a figure the load does not move, unlike CPU time).

``--by-module N`` (valgrind; slow) says where the instructions of the memory-off start-up go:
each module's import (the module's own code and whatever it runs while importing, its own
imports apart) and the work outside imports, for this tree and the baseline, the N largest
differences first. Valgrind dumps its counters each time the probe enters or leaves a module's
import, which adds about 0.2 M instructions per module to the totals.
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
from collections import Counter
from pathlib import Path

HEAVY = ("acp", "textual", "starlette", "uvicorn", "typer")


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


def received(record: Path) -> list[dict]:
    """The requests the server recorded so far (``received_at``, ``purpose``, ...)."""
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line]


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
    )
    return env


MEMORY_CASES = ("memory off", "memory on, no memories", "memory on, 200 memories")
SEEDED_MEMORIES = 200  # project memories in the third case
FIRST_PROMPT = "how do we deploy service 17 to the staging cluster?"
WORDS = [
    *("deploy", "service", "cluster", "staging", "billing", "invoice", "queue", "worker"),
    *("cache", "redis", "postgres", "schema", "migration", "release", "tag", "rollback"),
    *("metrics", "alert", "oncall", "runbook", "latency", "budget", "token", "auth"),
]


def prepare_cases(
    workdir: Path, base_url: str, baseline: Path | None
) -> dict[str, tuple[Path, dict[str, str]]]:
    """``name -> (project, environment)`` for each memory case (and the baseline's runs)."""
    cases: dict[str, tuple[Path, dict[str, str]]] = {}
    for index, case in enumerate(MEMORY_CASES):
        project = workdir / f"first-{index}"
        (project / ".git").mkdir(parents=True)
        env = make_env(base_url, workdir / f"home{index}")
        if case == "memory off":
            settings = project / ".cairn" / "settings.json"
            settings.parent.mkdir()
            settings.write_text(json.dumps({"memory": {"enableManagedAutoMemory": False}}))
        if case.endswith("200 memories"):
            seed_memories(project, SEEDED_MEMORIES, env)
        cases[case] = (project, env)
        if baseline is not None:
            cases[f"{case} (baseline)"] = (project, {**env, "PYTHONPATH": str(baseline)})
    return cases


def first_request_ms(
    runs: int,
    workdir: Path,
    baseline: Path | None = None,
    instructions: bool = False,
    by_module: int = 0,
) -> tuple[dict[str, list[float]], dict[str, int], dict[str, list[float]]]:
    """Spawn → first ``main`` request at the server, per memory case (runs interleaved), with
    ``instructions`` the CPU instructions each case executes until its first request, and the
    CPU time of each run's whole ``cairn -p`` process (spawn → exit, the answer included).

    With ``baseline`` (the ``src`` folder of another checkout) every case also runs that code,
    interleaved with this tree's, under the key ``"<case> (baseline)"``.
    """
    record = workdir / "first.jsonl"
    server, base_url = start_server([], record)
    cases = prepare_cases(workdir, base_url, baseline)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for project, env in cases.values():
            run_cairn(env, project, "warm the bytecode cache")
        for _ in range(runs):
            for name, (project, env) in cases.items():
                count = len(received(record))
                started, seconds = run_cairn(env, project, FIRST_PROMPT)
                first = next(r for r in received(record)[count:] if r["purpose"] == "main")
                samples[name].append((first["received_at"] - started) * 1000)
                cpu[name].append(seconds * 1000)
        counts = {
            name: instructions_to_first_send(env, project, workdir / "callgrind")
            for name, (project, env) in cases.items()
            if instructions
        }
        if by_module:
            off = [name for name in cases if name.startswith(MEMORY_CASES[0])]
            modules = {
                name: instructions_by_module(cases[name][1], cases[name][0], workdir / "callgrind")
                for name in off
            }
            print_by_module(modules, by_module)
        return samples, counts, cpu
    finally:
        server.terminate()


# Marks the first model request with a call to os.getpgid (which cairn never calls), where
# valgrind dumps: the start-up ends when the request's first bytes (``POST ...``) are written.
# Dumping at the first ``sock_send`` instead, as until Dec 2 2026, ended at asyncio's first
# self-pipe wake-up (a thread's result handed to the event loop), 50-170 M instructions before
# the request with memory on.
# Valgrind runs ~50x slower than the machine, so Recall's timers (the refinement's 1 s wait for
# the first request to be written, the semantic phase's 250 ms settle after it took its memory)
# would expire before the request and count work that at full speed comes after it. Holding
# them open (set when the module loads, so a memory-off start imports nothing more) keeps the
# order of a real start-up. A tree without a timer just gets an unused attribute.
HOLD_RECALL_TIMERS = """
import sys
from importlib.machinery import PathFinder


class _HoldRecallTimers:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "cairn.memory.recall.lifecycle":
            return None
        spec = PathFinder.find_spec(name, path, target)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.REQUEST_SENT_WAIT_S = module.SEMANTIC_SETTLE_S = 600.0

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _HoldRecallTimers)
"""
REQUEST_MARK = (
    """
import os, socket


def _marked(send):
    def send_marked(self, data, *args):
        if bytes(data[:5]) == b"POST ":
            os.getpgid(0)
        return send(self, data, *args)

    return send_marked


socket.socket.send = _marked(socket.socket.send)
socket.socket.sendall = _marked(socket.socket.sendall)
"""
    + HOLD_RECALL_TIMERS
)


def instructions_to_first_send(env: dict[str, str], cwd: Path, folder: Path) -> int:
    """Instructions ``cairn -p`` executes until it writes its first model request.

    Counted by valgrind's callgrind, which dumps its counters at :data:`REQUEST_MARK`'s marker:
    unlike wall or CPU time this does not move with the machine's load. Recall's timers are held
    open (:data:`HOLD_RECALL_TIMERS`) so the slowdown does not move its work before the request.
    (The Recall selector's side query is not sent before the main request when the fast phase
    finds nothing to refine, and with 200 memories it leaves after it; either way the first
    request ends the start-up.)
    """
    folder.mkdir(exist_ok=True)
    for old in folder.glob("cg.out*"):
        old.unlink()
    run = f"import sys\nsys.argv = ['cairn', '-p', {FIRST_PROMPT!r}, '-y']\n"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--dump-line=no",
            "--dump-before=getpgid",
            f"--callgrind-out-file={folder / 'cg.out'}",
            sys.executable,
            *("-c", REQUEST_MARK + run + "from cairn.cli.main import main\nmain()\n"),
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=True,
    )
    first_dump = (folder / "cg.out.1").read_text()
    return int(
        next(line for line in first_dump.splitlines() if line.startswith("summary:")).split()[1]
    )


OUTSIDE_IMPORTS = "(outside imports)"
# Runs `cairn -p` with a marker call (os.getsid, where valgrind dumps) on entering and leaving
# each module's import; the labels say which module each dump's instructions belong to.
MODULE_PROBE = f"""{REQUEST_MARK}
import atexit, os, sys
from importlib.machinery import PathFinder

labels, stack = [], []


def mark():
    labels.append(stack[-1] if stack else {OUTSIDE_IMPORTS!r})
    os.getsid(0)


class Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        spec = PathFinder.find_spec(name, path, target)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            mark()
            stack.append(name)
            try:
                run(module)
            finally:
                mark()
                stack.pop()

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, Finder)
atexit.register(lambda: open(os.environ["BENCH_LABELS"], "w").write("\\n".join(labels)))
sys.argv = ["cairn", "-p", {FIRST_PROMPT!r}, "-y"]
from cairn.cli.main import main

main()
"""


def instructions_by_module(env: dict[str, str], cwd: Path, folder: Path) -> Counter[str]:
    """Instructions until the first model request, by the module being imported (see
    ``MODULE_PROBE``); work outside any import is :data:`OUTSIDE_IMPORTS`."""
    folder.mkdir(exist_ok=True)
    for old in folder.glob("mod.*"):
        old.unlink()
    labels_file = folder / "mod.labels"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--dump-line=no",
            "--dump-before=getsid",
            "--dump-before=getpgid",
            f"--callgrind-out-file={folder / 'mod.out'}",
            sys.executable,
            *("-c", MODULE_PROBE),
        ],
        cwd=cwd,
        env={**env, "BENCH_LABELS": str(labels_file)},
        capture_output=True,
        check=True,
    )
    labels = iter(labels_file.read_text().split("\n"))
    dumps = sorted(folder.glob("mod.out.*"), key=lambda f: int(f.suffix[1:]))
    found: Counter[str] = Counter()
    for dump in dumps:
        text = dump.read_text()
        count = int(next(x for x in text.splitlines() if x.startswith("summary:")).split()[1])
        if "Trigger: --dump-before=getpgid" in text:
            found[OUTSIDE_IMPORTS] += count  # the request is being sent: the start-up is over
            break
        found[next(labels)] += count
    for dump in dumps:
        dump.unlink()
    return found


def print_by_module(by_tree: dict[str, Counter[str]], top: int) -> None:
    names = list(by_tree)
    this = by_tree[names[0]]
    other = by_tree[names[-1]] if len(names) > 1 else Counter()
    print()
    print(f"| module (memory off) | {' | '.join(names)} | difference (M instructions) |")
    print("|---|" + "---|" * (len(names) + 1))
    total = ["total", *(f"{sum(c.values()) / 1e6:,.0f}" for c in by_tree.values())]
    print(f"| {' | '.join(total)} | {(sum(this.values()) - sum(other.values())) / 1e6:+,.0f} |")
    modules = sorted(set(this) | set(other), key=lambda m: -abs(this[m] - other[m]))
    for module in modules[:top]:
        counts = " | ".join(f"{c[module] / 1e6:.1f}" for c in by_tree.values())
        print(f"| {module} | {counts} | {(this[module] - other[module]) / 1e6:+.1f} |")


def seed_memories(project: Path, count: int, env: dict[str, str]) -> None:
    """``count`` project memories, indexed (MEMORY.md and the saved search index)."""
    from cairn.config.settings import Settings
    from cairn.memory.manager import MemoryManager
    from cairn.memory.paths import memory_roots

    root = memory_roots(project, environ=env).project
    assert root is not None
    for index in range(count):
        words = [WORDS[(index * 7 + k * 13) % len(WORDS)] for k in range(12)]
        folder = root / ("project", "reference", "feedback")[index % 3]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{index:05d}.md").write_text(
            f"---\nname: {' '.join(words[:4])} {index}\ndescription: {' '.join(words[4:9])}\n"
            f"type: {folder.name}\n---\n\nService {index}: {' '.join(words)}.\n"
        )
    manager = MemoryManager(project, settings=Settings(), environ=env)
    manager.reindex()
    manager.close()


# CPU of one model request in a process of its own: the provider against the scripted server,
# sequential requests on a warm connection (the request built and written, the streamed answer
# read); the first one (connecting, first imports) is not counted.
REQUEST_PROBE = """
import asyncio, sys, time
from cairn.content import Content, Text
from cairn.llm.openai import OpenAIProvider
from cairn.llm.types import ModelRequest


async def main(base_url, count):
    provider = OpenAIProvider(base_url=base_url, api_key="bench", model="scripted-model")
    request = ModelRequest(model="scripted-model", contents=[Content("user", [Text("hi")])])

    async def one():
        async for _ in provider.stream(request):
            pass

    await one()
    started = time.process_time()
    for _ in range(count):
        await one()
    print((time.process_time() - started) / count * 1000)
    await provider.aclose()


asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""
REQUESTS_PER_RUN = 150


def request_cpu_ms(runs: int, workdir: Path, baseline: Path | None) -> dict[str, list[float]]:
    """CPU per model request (:data:`REQUEST_PROBE`), this tree's and the baseline's runs
    interleaved."""
    server, base_url = start_server([], workdir / "requests.jsonl")
    trees = {"this tree": None, **({"baseline": baseline} if baseline else {})}
    found: dict[str, list[float]] = {name: [] for name in trees}
    try:
        for _ in range(runs):
            for name, src in trees.items():
                env = make_env(base_url, workdir / "home-requests")
                if src is not None:
                    env["PYTHONPATH"] = str(src)
                done = subprocess.run(
                    [sys.executable, "-c", REQUEST_PROBE, base_url, str(REQUESTS_PER_RUN)],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                found[name].append(float(done.stdout.split()[-1]))
    finally:
        server.terminate()
    return found


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


# Runs tool_call_cpu_ms with a marker call (os.getsid, where valgrind dumps) at each of its
# process_time() readings: the dumps between them are the turns' instructions.
TOOL_PROBE = """
import os, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, {folder!r})
import core_bench
clock = time.process_time


def marked():
    os.getsid(0)
    return clock()


time.process_time = marked
with tempfile.TemporaryDirectory() as tmp:
    core_bench.tool_call_cpu_ms({runs}, Path(tmp))
"""


def tool_call_instructions(runs: int, folder: Path, src: Path | None = None) -> list[float]:
    """Millions of instructions per tool call, one figure per round (the first round warms up)."""
    folder.mkdir(exist_ok=True)
    for old in folder.glob("tool.out*"):
        old.unlink()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    probe = TOOL_PROBE.format(folder=str(Path(__file__).parent), runs=runs)
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--dump-line=no",
            "--dump-before=getsid",
            f"--callgrind-out-file={folder / 'tool.out'}",
            sys.executable,
            *("-c", probe),
        ],
        env=env,
        capture_output=True,
        check=True,
    )
    dumps = sorted(folder.glob("tool.out.*"), key=lambda f: int(f.suffix[1:]))
    counts = [
        int(next(x for x in d.read_text().splitlines() if x.startswith("summary:")).split()[1])
        for d in dumps
    ]
    for dump in dumps:
        dump.unlink()
    # After the start-up dump, three per round: the plain turn, the tool turn, the closing.
    plain, tools = counts[1::3], counts[2::3]
    return [(t - p) / TOOL_CALLS_PER_TURN / 1e6 for p, t in zip(plain[1:], tools[1:], strict=True)]


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
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the src folder of another checkout: its start-up runs interleaved with this tree's",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the instructions to the first request (needs valgrind; slow)",
    )
    parser.add_argument(
        "--by-module",
        type=int,
        default=0,
        metavar="N",
        help="also show the N modules whose imports differ most from the baseline's (valgrind)",
    )
    parser.add_argument(
        "--request-cpu",
        action="store_true",
        help="also time the CPU of one model request, with the baseline's interleaved",
    )
    parser.add_argument(
        "--tool-instructions",
        action="store_true",
        help="also count the instructions per tool call, with the baseline's too (valgrind)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        first, counts, first_cpu = first_request_ms(
            args.runs, workdir, args.baseline, args.instructions, args.by_module
        )
        plain, tools = tool_call_cpu_ms(max(5, args.runs // 2), workdir)
        per_request = request_cpu_ms(args.runs, workdir, args.baseline) if args.request_cpu else {}
        tool_instructions = {}
        if args.tool_instructions:
            trees = {"this tree": None, **({"baseline": args.baseline} if args.baseline else {})}
            for name, src in trees.items():
                tool_instructions[name] = tool_call_instructions(5, workdir / "callgrind", src)
    per_call = [(t - p) / TOOL_CALLS_PER_TURN for p, t in zip(plain, tools, strict=True)]
    print("Load average at the end: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))
    print()
    print("| figure | median | min | p90 | target |")
    print("|---|---|---|---|---|")
    for case, samples in first.items():
        print(
            f"| `cairn -p` spawn → first model request, {case} (ms) | "
            f"{statistics.median(samples):.0f} | {min(samples):.0f} | "
            f"{sorted(samples)[int(len(samples) * 0.9) - 1]:.0f} | ≤ 300 |"
        )
    for case, samples in first_cpu.items():
        print(
            f"| CPU of `cairn -p`, spawn → exit, {case} (ms) | "
            f"{statistics.median(samples):.0f} | {min(samples):.0f} | "
            f"{sorted(samples)[int(len(samples) * 0.9) - 1]:.0f} | |"
        )
    if counts:
        print()
        print("| case | instructions to the first request (millions) |")
        print("|---|---|")
        for name, count in counts.items():
            print(f"| {name} | {count / 1e6:.0f} |")
        print()
        print("| figure | median | min | p90 | target |")
        print("|---|---|---|---|---|")
    print(f"| CPU of a turn without tools (ms) | {statistics.median(plain):.0f} | | | |")
    print(
        f"| CPU of a turn with {TOOL_CALLS_PER_TURN} tool calls (ms) | "
        f"{statistics.median(tools):.0f} | | | |"
    )
    print(
        f"| cairn CPU per tool call (ms) | {statistics.median(per_call):.1f} | "
        f"{min(per_call):.1f} | | < 5 |"
    )
    for name, samples in per_request.items():
        print(
            f"| CPU of one model request, {name} (ms) | {statistics.median(samples):.2f} | "
            f"{min(samples):.2f} | | |"
        )
    for name, per_call_instructions in tool_instructions.items():
        print(
            f"| instructions per tool call, {name} (M) | "
            f"{statistics.median(per_call_instructions):.2f} | "
            f"{min(per_call_instructions):.2f} | | |"
        )
    print()
    print("| entry path | heavy modules imported |")
    print("|---|---|")
    for name, modules in heavy_imports().items():
        print(f"| {name} | {', '.join(modules) or 'none'} |")


if __name__ == "__main__":
    main()
