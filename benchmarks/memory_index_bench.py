"""MEMORY.md rebuilds with a pathological title: linear, not quadratic (issue #18).

Usage (from the repository root)::

    .venv/bin/python benchmarks/memory_index_bench.py
    .venv/bin/python benchmarks/memory_index_bench.py --baseline 8332d00 --runs 5

A project memory folder holds 50 ordinary memories and one whose title has N characters. Each
run rewrites that memory's body (so the store parses it again; its index line stays the same, so
no run pays for writing MEMORY.md) and times ``rebuild_index_files`` (the index rebuild Extract,
Dream and Forget do under the memory lock); the table shows the median and its ratio to N = 100.
``--baseline REV`` also times the old ``index_line`` of that commit (loaded from git) on the same
document, up to 16,000 characters (200,000 never finished).

The README next to this file records the figures, the command and the machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LENGTHS = (100, 1_000, 16_000, 200_000)
BASELINE_MAX = 16_000  # the old code does not finish much beyond this


def _memory(title: str, n: int, body: str = "") -> str:
    return f"---\nname: {title}\ndescription: memory {n}\ntype: project\n---\n\nFact {n}.{body}\n"


def _time_rebuilds(length: int, runs: int) -> float:
    from cairn.memory.paths import MemoryRoots
    from cairn.memory.store.memory_store import MemoryStore

    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        roots = MemoryRoots(base / "p" / "memory", base / "memories", base / "p")
        assert roots.project is not None
        (roots.project / "project").mkdir(parents=True)
        for n in range(50):
            (roots.project / "project" / f"m{n}.md").write_text(_memory(f"Memory {n}", n))
        target = roots.project / "project" / "long.md"
        store = MemoryStore(roots, watch=False)
        store.rebuild_index_files()  # warm: the first scan and the YAML import are not timed
        times: list[float] = []
        for run in range(runs):
            target.write_text(_memory("T" * length, 99, f" Run {run}."))  # reparsed, same line
            started = time.perf_counter()
            store.rebuild_index_files()
            times.append(time.perf_counter() - started)
        store.close()
    return statistics.median(times)


def _baseline_index_line(rev: str) -> Callable[[Any], Any]:
    source = subprocess.run(
        ["git", "show", f"{rev}:src/cairn/memory/index_file.py"],
        capture_output=True, text=True, check=True, cwd=HERE.parent,
    ).stdout  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location("baseline_index_file", handle.name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(handle.name)
    return module.index_line  # type: ignore[no-any-return]


def _time_baseline(index_line: Callable[[Any], Any], length: int, runs: int) -> float:
    from cairn.memory.document import MemoryDoc

    doc = MemoryDoc(Path("/m/project/long.md"), "project/long.md", "project", "project",
                    "T" * length, "memory 99", "Fact.", 0.0, 0)  # fmt: skip
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        index_line(doc)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", help="a git revision whose index_line to time too")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE.parent / "src"))
    old = _baseline_index_line(args.baseline) if args.baseline else None
    _time_rebuilds(LENGTHS[0], 2)  # the process's first store pays one-time costs: not timed
    rows = [(length, _time_rebuilds(length, args.runs)) for length in LENGTHS]
    reference = rows[0][1]
    print("| title characters | rebuild (median) | ratio to 100 | old index_line alone |")
    print("|---|---|---|---|")
    for length, seconds in rows:
        before = "–"
        if old is not None:
            before = "never finishes"
            if length <= BASELINE_MAX:
                before = f"{_time_baseline(old, length, min(args.runs, 3)) * 1000:.1f} ms"
        print(f"| {length:,} | {seconds * 1000:.2f} ms | {seconds / reference:.2f} | {before} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
