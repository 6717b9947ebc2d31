"""The trusted-folders check on a project with command files: how long ``project_trust`` takes.

Usage: python benchmarks/trust_bench.py [--files 50 500] [--runs 15] [--baseline ../other/src]

Each size gets a project whose ``.claude/commands/`` holds that many command files, each with
front matter granting tools (``allowed-tools``); the check lists every grant. The figure is the
best of ``--runs`` calls in one process, after a first call that imports the parsers. With
``--baseline`` (the ``src`` folder of another checkout) the same is measured with that code, in
its own process, right after this tree's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import os, sys, time
from pathlib import Path
root = Path(sys.argv[1])
os.environ["CAIRN_HOME"] = str(root.parent / "cairn-home")
from cairn.config.trust import project_trust
project_trust(root)
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    trust = project_trust(root)
    times.append(time.perf_counter() - start)
grants = sum(1 for c in trust.commands if c.kind == "grant")
print(f"{min(times) * 1000:.2f} {grants}")
"""


def make_project(folder: Path, files: int) -> Path:
    root = folder / f"project-{files}"
    commands = root / ".claude" / "commands"
    commands.mkdir(parents=True)
    (root / ".git").mkdir()
    for index in range(files):
        (commands / f"c{index:04}.md").write_text(
            f"---\ndescription: command {index}\nargument-hint: [x]\n"
            f"allowed-tools: Bash(git add *), Read\n---\nDo thing {index} with $ARGUMENTS\n"
        )
    return root


def measure(root: Path, runs: int, src: Path | None) -> tuple[float, int]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(root), str(runs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    best, grants = done.stdout.split()
    return float(best), int(grants)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, nargs="+", default=[50, 500])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline", type=Path)
    args = parser.parse_args()
    trees: dict[str, Path | None] = {"this tree": None}
    if args.baseline is not None:
        trees["baseline"] = args.baseline
    print("| command files | " + " | ".join(f"{name} (ms, best)" for name in trees) + " |")
    print("|---|" + "---|" * len(trees))
    with tempfile.TemporaryDirectory() as tmp:
        for files in args.files:
            root = make_project(Path(tmp), files)
            cells = []
            for src in trees.values():
                best, grants = measure(root, args.runs, src)
                cells.append(f"{best:.1f} ({grants} grants listed)")
            print(f"| {files} | " + " | ".join(cells) + " |")
    print("Load average at the end: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
