"""Safety-net figures: checkpoint snapshots and restores, and the shell sandbox's overhead.

Usage: python benchmarks/safety_bench.py [--files 2000] [--runs 9] [--sandbox-runs 30]

- checkpoints: a git checkout of ``--files`` source files (1-10 KB, 40 folders, committed) in a
  temp folder; its first snapshot (the shadow repository is new: every file is hashed and
  stored), then an incremental one after 10 files changed and 5 were created; the shadow
  repository's size on disk after each; a restore of the first snapshot (15 files back to how
  they were, created ones removed) and its undo. Medians of ``--runs`` fresh repositories for the
  first snapshot, of ``--runs`` rounds on one repository for the rest.
- sandbox: ``run_shell_command`` of ``true`` through the real tool, unsandboxed, under bubblewrap
  with ``network: none`` and with ``network: loopback``; ``--sandbox-runs`` each, interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cairn.abort import AbortController
from cairn.recording.checkpoints import ShadowRepository
from cairn.tools.base import ToolContext
from cairn.tools.sandbox import SandboxPolicy, bwrap_problem
from cairn.tools.shell import ShellTool

T = TypeVar("T")
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


WORDS = (
    "def",
    "return",
    "self",
    "value",
    "items",
    "result",
    "config",
    "path",
    "name",
    "index",
    "data",
    "error",
    "None",
    "True",
    "False",
    "import",
    "from",
    "class",
    "async",
    "await",
    "for",
    "in",
    "if",
    "else",
    "elif",
    "while",
    "try",
    "except",
    "raise",
    "with",
    "as",
    "lambda",
)


def source_text(rng: random.Random, lines: int) -> str:
    """Code-like text: compresses about as well as real source (≈3:1), unlike repeated lines."""
    out = []
    for _ in range(lines):
        indent = " " * 4 * rng.randint(0, 3)
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
        out.append(f"{indent}{words}_{rng.randint(0, 999)}")
    return "\n".join(out) + "\n"


def make_checkout(root: Path, files: int, seed: int = 7) -> list[Path]:
    """``files`` source files of 1-10 KB in 40 × 7 folders, committed."""
    rng = random.Random(seed)
    paths = []
    for index in range(files):
        path = root / f"pkg{index % 40}" / f"mod{index % 7}" / f"file{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source_text(rng, rng.randint(25, 250)))
        paths.append(path)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True, env=GIT_ENV)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=GIT_ENV)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=root, check=True, env=GIT_ENV)
    return paths


def size_on_disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and its waited-for children: unlike wall
    time, it hardly moves with the machine's load."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(function: Callable[..., T], *args: Any) -> tuple[float, float, T]:
    """(wall seconds, CPU seconds, the result)."""
    started, cpu = time.perf_counter(), cpu_seconds()
    value = function(*args)
    return time.perf_counter() - started, cpu_seconds() - cpu, value


def change(paths: list[Path], round_: int) -> list[Path]:
    for path in paths[round_ * 10 : round_ * 10 + 10]:
        path.write_text(path.read_text() + f"# round {round_}\n")
    created = []
    for index in range(5):
        new = paths[0].parent / f"new_{round_}_{index}.py"
        new.write_text("created = True\n" * 50)
        created.append(new)
    return created


def checkpoint_figures(files: int, runs: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}

    def record(step: str, wall: float, cpu: float) -> None:
        figures.setdefault(step, []).append(wall)
        figures.setdefault(f"{step}_cpu", []).append(cpu)

    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="cairn-bench-") as temp:
            work, store = Path(temp) / "work", Path(temp) / "store"
            work.mkdir()
            paths = make_checkout(work, files)
            shadow = ShadowRepository(work, store)
            wall, cpu, first = timed(shadow.snapshot, "first")
            record("first", wall, cpu)
            figures.setdefault("first_mb", []).append(size_on_disk(store) / (1 << 20))
            if run == 0:
                assert first.files == files + 0, first
            change(paths, run)
            wall, cpu, _ = timed(shadow.snapshot, "incremental")
            record("incremental", wall, cpu)
            figures.setdefault("incremental_mb", []).append(size_on_disk(store) / (1 << 20))
            wall, cpu, report = timed(shadow.restore, first.commit)
            assert report.changed == 15, report
            record("restore", wall, cpu)
            wall, cpu, _ = timed(shadow.restore, report.undo.commit)
            record("undo", wall, cpu)
    return figures


async def sandbox_figures(workspace: Path, runs: int) -> dict[str, list[float]]:
    tool = ShellTool()
    policies: dict[str, SandboxPolicy | None] = {
        "unsandboxed": None,
        "sandbox, network none": SandboxPolicy(workspace=workspace, network="none"),
        "sandbox, network loopback": SandboxPolicy(workspace=workspace, network="loopback"),
    }
    times: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, policy in policies.items():
            ctx = ToolContext(workspace=workspace, abort=AbortController().signal, sandbox=policy)
            started, cpu = time.perf_counter(), cpu_seconds()
            result = await tool.execute({"command": "true"}, ctx)
            times.setdefault(name, []).append(time.perf_counter() - started)
            times.setdefault(f"{name}_cpu", []).append(cpu_seconds() - cpu)
            assert result.ok and "Exit code: 0" in (result.output or ""), result
    return times


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--sandbox-runs", type=int, default=30)
    args = parser.parse_args()

    figures = checkpoint_figures(args.files, args.runs)
    print(f"Checkpoints of a {args.files}-file git checkout (medians of {args.runs})\n")
    print("| step | wall time | CPU time | shadow repository on disk |")
    print("|---|---|---|---|")
    steps = (
        ("first", "first snapshot", "first_mb"),
        ("incremental", "incremental snapshot (10 changed, 5 new)", "incremental_mb"),
        ("restore", "restore (15 files back)", None),
        ("undo", "undo of that restore", None),
    )
    for key, label, size in steps:
        on_disk = f"{statistics.median(figures[size]):.1f} MB" if size else ""
        print(f"| {label} | {median_ms(figures[key])} | {median_ms(figures[key + '_cpu'])} | "
              f"{on_disk} |")  # fmt: skip

    problem = bwrap_problem()
    if problem is not None:
        print(f"\nSandbox figures skipped: {problem}")
        return
    with tempfile.TemporaryDirectory(prefix="cairn-bench-sandbox-") as temp:
        times = asyncio.run(sandbox_figures(Path(temp), args.sandbox_runs))
    base = statistics.median(times["unsandboxed"])
    print(f"\n`run_shell_command` of `true` (medians of {args.sandbox_runs}, interleaved)\n")
    print("| how | wall time | over unsandboxed | CPU time |")
    print("|---|---|---|---|")
    for name in ("unsandboxed", "sandbox, network none", "sandbox, network loopback"):
        extra = statistics.median(times[name]) - base
        over = "–" if name == "unsandboxed" else f"+{extra * 1000:.0f} ms"
        print(f"| {name} | {median_ms(times[name])} | {over} | {median_ms(times[name + '_cpu'])} |")
    print(f"\n{_version('bwrap')}, {_version('git')}; checkout {_checkout_size(args.files)}")


def _version(program: str) -> str:
    return subprocess.run([program, "--version"], capture_output=True, text=True).stdout.strip()


def _checkout_size(files: int) -> str:
    with tempfile.TemporaryDirectory(prefix="cairn-bench-size-") as temp:
        paths = make_checkout(Path(temp), files)
        total = sum(p.stat().st_size for p in paths)
    return f"{total / (1 << 20):.1f} MB in {files} files"


if __name__ == "__main__":
    main()
