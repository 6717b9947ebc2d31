"""What the permission checks and the killable search cost (issue 18's tool hardening).

Prints two tables:

- ``grep_search`` over a generated tree of small files: ripgrep, the Python search in its own
  killable process (what runs without rg), and the same search run in a thread inside cairn
  (how the fallback ran before it could be killed) — the difference is the process start-up.
- the checks made before a shell call: parsing and resolving the command, the read-only check
  (with its path checks, glob expansion and git config probe) and deny-rule matching.

    python benchmarks/tools_bench.py [--files 200] [--runs 21]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cairn.abort import AbortController
from cairn.tools._grep_worker import search
from cairn.tools.base import ToolContext
from cairn.tools.grep import GrepTool
from cairn.tools.permissions import PermissionRules
from cairn.tools.shell_readonly import ShellScope, is_read_only_command
from cairn.tools.shell_resolve import resolve

COMMANDS = [
    "ls -la src && git status",
    "git log --oneline -5 -- src/m1.py",
    "grep -rn TODO src | head -20",
    "cat src/*.py | wc -l",
    "sudo env nice bash -c 'rm -rf build' ; find . -delete",
]


def make_tree(root: Path, files: int) -> None:
    (root / "src").mkdir(parents=True)
    for index in range(files):
        (root / "src" / f"m{index}.py").write_text(f"def f{index}():\n    return {index}\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:,.1f} ms"


async def grep_table(root: Path, runs: int) -> None:
    tool = GrepTool()
    rg = shutil.which("rg")

    async def with_path(path: str | None) -> float:
        import os

        saved = os.environ["PATH"]
        if path is not None:
            os.environ["PATH"] = path
        try:
            ctx = ToolContext(workspace=root, abort=AbortController().signal)
            started = time.perf_counter()
            await tool.execute({"pattern": "return 1"}, ctx)
            return time.perf_counter() - started
        finally:
            os.environ["PATH"] = saved

    async def in_thread() -> float:
        started = time.perf_counter()
        await asyncio.to_thread(lambda: list(search("return 1", root, None, 501)))
        return time.perf_counter() - started

    samples: dict[str, list[float]] = {"rg": [], "worker": [], "thread": []}
    for _ in range(runs):  # interleaved, so load changes hit every variant alike
        if rg:
            samples["rg"].append(await with_path(None))
        samples["worker"].append(await with_path("/nonexistent"))
        samples["thread"].append(await in_thread())
    print("| grep_search, one call | median |")
    print("|---|---|")
    if rg:
        print(f"| ripgrep | {median_ms(samples['rg'])} |")
    print(f"| Python search in its own process (no rg) | {median_ms(samples['worker'])} |")
    before = median_ms(samples["thread"])
    print(f"| the same search in a thread (before: not killable) | {before} |")


def check_table(root: Path, runs: int) -> None:
    scope = ShellScope.of(root)
    rules = PermissionRules.parse(allow=["Bash(git *)"], deny=["Bash(rm*)", "Read(secret/**)"])

    def timed(fn: Callable[[str], object], command: str) -> float:
        started = time.perf_counter()
        for _ in range(20):
            fn(command)
        return (time.perf_counter() - started) / 20

    print()
    print("| command | resolve | read-only check | rule match |")
    print("|---|---|---|---|")
    for command in COMMANDS:
        parts = [
            [timed(resolve, command) for _ in range(runs)],
            [timed(lambda c: is_read_only_command(c, scope), command) for _ in range(runs)],
            [
                timed(lambda c: rules.match("run_shell_command", {"command": c}, root), command)
                for _ in range(runs)
            ],
        ]
        cells = " | ".join(f"{statistics.median(p) * 1e6:,.0f} µs" for p in parts)
        print(f"| `{command}` | {cells} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=21)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "project"
        make_tree(root, options.files)
        asyncio.run(grep_table(root, options.runs))
        check_table(root, options.runs)


if __name__ == "__main__":
    main()
