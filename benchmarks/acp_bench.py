"""``cairn --acp`` speed: start-up, first model request, a one-tool-call turn, memory use.

Usage (from the repository root)::

    .venv/bin/python benchmarks/acp_bench.py                 # everything
    .venv/bin/python benchmarks/acp_bench.py --startup       # one section
    .venv/bin/python benchmarks/acp_bench.py --runs 20 --sizes 0,1000,10000

Every figure is measured on the real ``cairn --acp`` process, driven over its stdin/stdout by
a minimal JSON-RPC client in this script, against the scripted model server (instant answers;
the Recall selector answers after 2 s so it never hides what the first request waits for).

- start-up: spawn → ``initialize`` answered → ``session/new`` answered (fresh CAIRN_HOME each run),
  and stdin closed → the process exited (the shutdown, its wall time and its CPU: the agent's
  whole CPU, read from this process's reaped children, less what it had used by
  ``session/new``); plus the cost of importing the ACP SDK,
  with and without cairn's fast import. ``--baseline ../other/src`` runs another checkout's agent
  interleaved with this one's (``PYTHONPATH``), so before/after figures share the machine's load;
  ``--instructions`` also counts, with valgrind, the CPU instructions of a whole short life
  (spawn, ``initialize``, ``session/new``, stdin closed, exit): a figure the load does not move;
- first model request: ``session/prompt`` written → the model server receives the ``main``
  request, with 0, 1,000 and 10,000 project memory files (indexed, as a project that has used
  memory for a while is): right after ``session/new``, after 2 s idle, and warm (next prompt);
- a turn with one tool call (``read_file``): ``session/prompt`` written → its response read;
- RSS and peak RSS of the agent idle after ``session/new`` and after 20 turns.

CPU and memory are the whole process tree's: the agent and every process it started
(``process_tree.py``).

Medians, with min and max; the README next to this file records the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from process_tree import TreeSampler, tree_cpu_seconds, tree_rss_kib  # noqa: E402

from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call  # noqa: E402
from cairn.testing.fixtures import isolated_env  # noqa: E402

CAIRN = str(Path(sys.executable).parent / "cairn")
SELECTOR_DELAY = 2.0  # seconds: the selector never answers before the first request leaves
IDLE_BEFORE_PROMPT = 2.0  # seconds between session/new and the "after idle" prompt
RSS_TURNS = 20  # turns before the second RSS reading
PROMPT = "how do we deploy service 17 to the staging cluster?"
QWEN_REFERENCE = {  # Qwen Code 0.24.4 --acp on this machine (from issue 5)
    "spawn → initialize": "≈3.2 s",
    "first prompt → first request": "≈0.7 s",
    "one-tool-call turn": "≈2.2 s",
}
TARGETS = {
    "spawn → session/new": "≤ 1.0 s",
    "first prompt → first request": "≤ 100 ms (warm ≤ 20 ms)",
    "one-tool-call turn": "≤ 0.5 s",
}
WORDS = [
    "deploy",
    "service",
    "cluster",
    "staging",
    "billing",
    "invoice",
    "queue",
    "worker",
    "cache",
    "redis",
    "postgres",
    "schema",
    "migration",
    "release",
    "tag",
    "rollback",
    "metrics",
    "alert",
    "oncall",
    "runbook",
    "latency",
    "budget",
    "token",
    "auth",
    "login",
    "session",
    "cookie",
    "header",
    "proxy",
    "ingress",
    "dns",
    "certificate",
    "backup",
    "restore",
    "snapshot",
    "index",
    "search",
]


# ----- a minimal ACP client over the agent's pipes -----


class AgentProcess:
    def __init__(self, env: dict[str, str], cwd: Path, wrapper: Sequence[str] = ()) -> None:
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [*wrapper, CAIRN, "--acp"],
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.cwd = cwd
        self.sampler: TreeSampler | None = None
        self._next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Send a request; its response and the time it took (s)."""
        self._next_id += 1
        request_id = self._next_id
        sent = self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = self._read()
            if message.get("id") == request_id and "method" not in message:
                return message, time.perf_counter() - sent

    def send(self, message: dict[str, Any]) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        return time.perf_counter()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the agent closed its stdout")
        message: dict[str, Any] = json.loads(line)
        if message.get("method") == "session/request_permission":  # never expected here
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {"outcome": {"outcome": "cancelled"}},
                }
            )
        return message

    def new_session(self) -> str:
        self.request("initialize", {"protocolVersion": 1})
        response, _ = self.request("session/new", {"cwd": str(self.cwd), "mcpServers": []})
        return str(response["result"]["sessionId"])

    def prompt(self, session_id: str, text: str = PROMPT) -> tuple[dict[str, Any], float]:
        blocks = [{"type": "text", "text": text}]
        return self.request("session/prompt", {"sessionId": session_id, "prompt": blocks})

    def cpu_seconds(self) -> float:
        """User + system CPU time the agent and every process it started have used so far
        (immune to other load)."""
        return tree_cpu_seconds(self.process.pid)

    def watch_memory(self) -> None:
        """Sample the agent's process tree from now on (peak RSS of the agent and children)."""
        self.sampler = TreeSampler(self.process.pid).start()

    def memory_kib(self) -> tuple[int, int]:
        """(RSS now, peak RSS since :meth:`watch_memory`) of the agent and its children, KiB."""
        self.sampler.sample()
        return tree_rss_kib(self.process.pid), self.sampler.stats.peak_rss_kib

    def close(self, timeout: float = 30) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def workspace(
    root: Path, server: ScriptedServer, src: Path | None = None
) -> tuple[dict[str, str], Path]:
    """Environment and project for one agent; ``src``: run that checkout's cairn instead."""
    env = isolated_env(server.base_url, root)
    env["CAIRN_MEMORY_LOCAL"] = "1"
    if src is not None:
        env["PYTHONPATH"] = str(src)
    # As an installed cairn runs: bytecode written once and reused (this machine sets
    # PYTHONDONTWRITEBYTECODE, which would recompile every changed module on every start).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    project = root / "project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    return env, project


def selector_handler(request: RecordedRequest) -> Reply | None:
    if request.purpose == "recall-selector":
        return Reply(text='{"selected_memories": []}', delay=SELECTOR_DELAY)
    return None


# ----- sections -----


def bench_startup(
    server: ScriptedServer, runs: int, baseline: Path | None = None, instructions: bool = False
) -> None:
    trees: dict[str, Path | None] = {"this tree": None}
    if baseline is not None:
        trees["baseline"] = baseline
    steps = ("initialize", "session/new", "cpu", "exit", "exit cpu")
    samples = {name: {step: [] for step in steps} for name in trees}
    for _ in range(runs):
        for name, src in trees.items():  # interleaved: both trees see the same load
            with tempfile.TemporaryDirectory() as tmp:
                env, project = workspace(Path(tmp), server, src)
                agent = AgentProcess(env, project)
                agent.request("initialize", {"protocolVersion": 1})
                samples[name]["initialize"].append(time.perf_counter() - agent.started)
                agent.request("session/new", {"cwd": str(project), "mcpServers": []})
                samples[name]["session/new"].append(time.perf_counter() - agent.started)
                samples[name]["cpu"].append(agent.cpu_seconds())
                closing, reaped = time.perf_counter(), _children_cpu()
                agent.close()
                samples[name]["exit"].append(time.perf_counter() - closing)
                whole = _children_cpu() - reaped  # the agent and the processes it reaped
                samples[name]["exit cpu"].append(whole - samples[name]["cpu"][-1])
    rows = []
    for name, figures in samples.items():
        label = f" ({name})" if baseline is not None else ""
        rows += [
            [
                f"spawn → initialize answered{label}",
                *ms3(figures["initialize"]),
                "",
                QWEN_REFERENCE["spawn → initialize"],
            ],
            [
                f"spawn → session/new answered{label}",
                *ms3(figures["session/new"]),
                TARGETS["spawn → session/new"],
                "",
            ],
            [f"agent CPU time until then{label}", *ms3(figures["cpu"]), "", ""],
            [f"stdin closed → process exited{label}", *ms3(figures["exit"]), "", ""],
            [f"agent CPU time from stdin closed to exit{label}", *ms3(figures["exit cpu"]), "", ""],
        ]
    table(
        f"Start-up (median of {runs}, fresh CAIRN_HOME each run)",
        ["step", "median", "min", "max", "target", "Qwen Code 0.24.4"],
        rows,
    )
    if instructions:
        counts = [
            [name, f"{life_instructions(server, src) / 1e6:,.0f} M"] for name, src in trees.items()
        ]
        table(
            "Instructions of a short life: spawn, initialize, session/new, stdin closed, exit",
            ["tree", "instructions (callgrind)"],
            counts,
        )
    plain = import_cost("import acp")
    fast = import_cost("from cairn.acp._sdk import import_sdk; import_sdk()")
    base = import_cost("import pydantic")
    table(
        "Importing the ACP SDK (median of 7, pydantic already imported)",
        ["how", "median", "min", "max"],
        [
            ["import acp", *ms3([p - b for p, b in zip(plain, base, strict=True)])],
            ["cairn.acp._sdk.import_sdk()", *ms3([f - b for f, b in zip(fast, base, strict=True)])],
        ],
    )


def _children_cpu() -> float:
    """User + system CPU of this process's children that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def life_instructions(server: ScriptedServer, src: Path | None) -> int:
    """CPU instructions the agent executes from spawn to exit (valgrind's callgrind)."""
    with tempfile.TemporaryDirectory() as tmp:
        env, project = workspace(Path(tmp), server, src)
        out = Path(tmp) / "callgrind.out"
        wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
        agent = AgentProcess(env, project, wrapper)
        agent.new_session()
        agent.close(timeout=600)
        summary = next(line for line in out.read_text().splitlines() if line.startswith("summary:"))
        return int(summary.split()[1])


def import_cost(statement: str, runs: int = 7) -> list[float]:
    code = (
        "import time; t = time.perf_counter(); import pydantic; "
        f"{statement}; print(time.perf_counter() - t)"
    )
    return [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(runs)
    ]


Cases = dict[str, tuple[list[float], list[float]]]  # case -> (session/new times, prompt times)


def bench_first_request(server: ScriptedServer, sizes: Sequence[int], runs: int) -> None:
    rows = []
    idle_case = f"first prompt, {IDLE_BEFORE_PROMPT:g} s after session/new"
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            env, project = workspace(Path(tmp), server)
            seed_memories(project, size, env)
            cases: Cases = {}
            for _ in range(runs):
                if size:
                    forget_saved_index(env)
                    measure(server, env, project, cases, "first prompt, no saved memory index")
                measure(server, env, project, cases, "first prompt, right after session/new")
                measure(server, env, project, cases, idle_case, idle=IDLE_BEFORE_PROMPT)
                measure(server, env, project, cases, "second prompt, at once", second=0.0)
                measure(server, env, project, cases, "second prompt, 1 s later", second=1.0)
        for case, (new_times, prompt_times) in cases.items():
            rows.append([f"{size:,}", case, *ms3(prompt_times), ms3(new_times)[0]])
    table(
        f"session/prompt written → first main request at the model server (median of {runs})",
        ["memory files", "prompt", "median", "min", "max", "session/new took (median)"],
        rows,
    )
    print(
        f"target: {TARGETS['first prompt → first request']}; Qwen Code 0.24.4: "
        f"{QWEN_REFERENCE['first prompt → first request']}\n"
    )


def measure(
    server: ScriptedServer,
    env: dict[str, str],
    project: Path,
    cases: Cases,
    case: str,
    *,
    idle: float = 0.0,
    second: float | None = None,
) -> None:
    """One agent: session/new, then two prompts (``second`` s apart); records one figure.

    ``second`` set: the figure of the second prompt (the first turn's background Extract may
    still be running when it is sent at once).
    """
    new_times, prompt_times = cases.setdefault(case, ([], []))
    agent = AgentProcess(env, project)
    agent.request("initialize", {"protocolVersion": 1})
    response, elapsed = agent.request("session/new", {"cwd": str(project), "mcpServers": []})
    session_id = response["result"]["sessionId"]
    new_times.append(elapsed)
    time.sleep(idle)
    first = time_to_main_request(server, lambda: agent.prompt(session_id))
    if second is not None:
        time.sleep(second)
        first = time_to_main_request(server, lambda: agent.prompt(session_id))
    prompt_times.append(first)
    agent.close()


def time_to_main_request(server: ScriptedServer, prompt: Callable[[], object]) -> float:
    before = len(server.requests)
    sent_wall = time.time()
    prompt()
    main = next(r for r in server.requests[before:] if r.purpose == "main")
    if any(r.purpose == "recall-selector" for r in server.requests[before:]):
        assert main.contains("## Relevant memory"), "Recall's fast result is not in the request"
    return main.received_at - sent_wall


def forget_saved_index(env: dict[str, str]) -> None:
    """Delete the saved memory search index: the agent must scan every file (a first start)."""
    for folder in Path(env["CAIRN_HOME"]).glob("**/recall-index"):
        shutil.rmtree(folder)


def seed_memories(project: Path, count: int, env: dict[str, str]) -> None:
    """``count`` project memories, indexed (MEMORY.md and the saved search index)."""
    if count == 0:
        return
    root = project / ".cairn" / "memory"
    for index in range(count):
        words = [WORDS[(index * 7 + k * 13) % len(WORDS)] for k in range(12)]
        folder = root / ("project", "reference", "feedback")[index % 3]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{index:05d}.md").write_text(
            f"---\nname: {' '.join(words[:4])} {index}\ndescription: {' '.join(words[4:9])}\n"
            f"type: {folder.name}\n---\n\nService {index}: {' '.join(words)}.\n"
        )
    code = (
        "from pathlib import Path; from cairn.config.settings import Settings; "
        "from cairn.memory.manager import MemoryManager; "
        f"m = MemoryManager(Path({str(project)!r}), settings=Settings()); m.reindex(); m.close()"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def bench_tool_turn(server: ScriptedServer, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env, project = workspace(Path(tmp), server)
        (project / "notes.txt").write_text("alpha\nbeta\n")
        agent = AgentProcess(env, project)
        session_id = agent.new_session()
        times = []
        for _ in range(runs):
            server.enqueue(
                tool_call("read_file", {"file_path": "notes.txt"}), reply("Done."), purpose="main"
            )
            response, elapsed = agent.prompt(session_id, "read notes.txt")
            assert response["result"]["stopReason"] == "end_turn", response
            times.append(elapsed)
        agent.close()
    table(
        f"A turn with one tool call (read_file), session/prompt → response (median of {runs})",
        ["turns", "median", "min", "max", "target", "Qwen Code 0.24.4"],
        [
            ["first turn", *ms3(times[:1]), "", ""],
            [
                "all turns",
                *ms3(times),
                TARGETS["one-tool-call turn"],
                QWEN_REFERENCE["one-tool-call turn"],
            ],
        ],
    )


def bench_memory(server: ScriptedServer) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env, project = workspace(Path(tmp), server)
        (project / "notes.txt").write_text("alpha\n" * 200)
        agent = AgentProcess(env, project)
        agent.watch_memory()
        session_id = agent.new_session()
        time.sleep(0.5)
        idle = agent.memory_kib()
        for turn in range(RSS_TURNS):
            if turn % 2:
                server.enqueue(tool_call("read_file", {"file_path": "notes.txt"}), purpose="main")
            server.enqueue(reply("Answer " + "word " * 200), purpose="main")
            agent.prompt(session_id, f"question {turn}")
        after = agent.memory_kib()
        agent.close()
    table(
        "Agent memory, with every process it started (MiB)",
        ["when", "RSS", "peak RSS (sampled every 10 ms)"],
        [
            ["idle after session/new", mib(idle[0]), mib(idle[1])],
            [f"after {RSS_TURNS} turns", mib(after[0]), mib(after[1])],
        ],
    )


# ----- output -----


def ms3(values: Sequence[float]) -> list[str]:
    return [f"{1000 * v:.0f} ms" for v in (statistics.median(values), min(values), max(values))]


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f}"


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print(f"### {title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--startup", action="store_true")
    parser.add_argument("--first-request", action="store_true")
    parser.add_argument("--tool-turn", action="store_true")
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--sizes", default="0,1000,10000")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="the src folder of another checkout: its start-up runs interleaved with this tree's",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count the start-up's instructions with valgrind (slow)",
    )
    args = parser.parse_args()
    every = not (args.startup or args.first_request or args.tool_turn or args.memory)
    os.environ.pop("CAIRN_HOME", None)
    print(f"# cairn --acp benchmark ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs)\n")
    with ScriptedServer(default=reply("ok")) as server:
        server.handler = selector_handler
        if every or args.startup:
            bench_startup(server, args.runs, args.baseline, args.instructions)
        if every or args.first_request:
            sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
            bench_first_request(server, sizes, max(3, args.runs // 2))
        if every or args.tool_turn:
            bench_tool_turn(server, args.runs)
        if every or args.memory:
            bench_memory(server)


if __name__ == "__main__":
    main()
