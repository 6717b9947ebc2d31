"""Whether each function-level import of cairn still pays for itself at start-up.

Usage: python benchmarks/import_bench.py [--runs 3] [--write tests/deferred_imports.txt]

An import inside a function defers its module until the function runs; that pays only when it
keeps the module off a start path, i.e. when the importing module is loaded on a path and the
imported one is not. The paths measured, each a real process against the scripted model server
(``python -m cairn.testing.server``), with the modules loaded at the point the path ends:

- ``cairn -p`` with managed memory off, and on (a project without memories): at the first
  model request (the first ``httpx.AsyncClient.send``);
- ``cairn --acp``: ``initialize``, ``session/new``, stdin closed: at exit.

For every module imported inside a function somewhere in ``src/cairn`` the table says on which
paths it is kept off, and what importing it there would cost: the best of ``--runs`` wall times
of importing it in a fresh process after that path's modules (so what the path loads anyway is
not counted). The other verdicts: "loaded anyway" (every measured path that loads an importer
loads the module too: the deferral pays nothing there, its import belongs at module level unless
that would close an import cycle) and "importers off these paths" (the TUI, ``cairn serve``,
subcommands, MCP connections: not measured here). ``--write`` writes the allowlist the
import-graph test reads (``tests/deferred_imports.txt``): the modules kept off a path, with
their cost, and those whose importers are off the measured paths.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from core_bench import make_env, start_server

SRC = Path(__file__).resolve().parents[1] / "src"
PROBE = """
import atexit, json, sys
import httpx

out, snapshot = sys.argv.pop(1), []
send = httpx.AsyncClient.send


async def first_send(self, request, **kwargs):
    if not snapshot:
        snapshot.append(sorted(sys.modules))
    return await send(self, request, **kwargs)


httpx.AsyncClient.send = first_send

def dump():
    open(out, "w").write(json.dumps(snapshot[0] if snapshot else sorted(sys.modules)))


atexit.register(dump)
from cairn.cli.main import main

sys.exit(main())
"""


def deferred_imports(src: Path = SRC) -> dict[str, set[str]]:
    """``imported module -> the modules that import it inside a function`` (cairn modules and
    third-party ones; type-only imports excluded)."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted((src / "cairn").rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found[node.module].add(module)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        found[alias.name].add(module)
    return found


def loaded_on_paths(workdir: Path) -> dict[str, set[str]]:
    record = workdir / "requests.jsonl"
    server, base_url = start_server([], record)
    paths: dict[str, set[str]] = {}
    try:
        for memory in (False, True):
            project = workdir / f"project-{memory}"
            (project / ".git").mkdir(parents=True)
            (project / ".cairn").mkdir()
            settings = {"memory": {"enableManagedAutoMemory": memory}}
            (project / ".cairn" / "settings.json").write_text(json.dumps(settings))
            env = make_env(base_url, workdir / f"home-{memory}")
            out = workdir / f"modules-{memory}.json"
            argv = [sys.executable, "-c", PROBE, str(out), "-p", "hi", "-y"]
            subprocess.run(argv, cwd=project, env=env, capture_output=True, check=True)
            name = f"cairn -p (memory {'on' if memory else 'off'})"
            paths[name] = set(json.loads(out.read_text()))
        paths["cairn --acp"] = _acp_modules(workdir, base_url)
    finally:
        server.terminate()
    return paths


def _acp_modules(workdir: Path, base_url: str) -> set[str]:
    project = workdir / "acp-project"
    (project / ".git").mkdir(parents=True)
    env = make_env(base_url, workdir / "home-acp")
    out = workdir / "modules-acp.json"
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(project), "mcpServers": []},
        },
    ]
    process = subprocess.Popen(
        [sys.executable, "-c", PROBE, str(out), "--acp"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    for message in messages:  # one at a time: session/new after initialize was answered
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        for line in process.stdout:
            with contextlib.suppress(ValueError):
                if json.loads(line).get("id") == message["id"]:
                    break
    process.stdin.close()
    process.wait(timeout=60)
    return set(json.loads(out.read_text()))


def import_cost_ms(module: str, preloaded: set[str], runs: int) -> float | None:
    """The best of ``runs`` wall times of importing ``module`` after ``preloaded``."""
    warm = sorted(m for m in preloaded if not m.startswith(("__main__", "_frozen")))
    probe = (
        "import importlib, sys, time\n"
        "for name in sys.argv[2:]:\n"
        "    try:\n        importlib.import_module(name)\n    except Exception:\n        pass\n"
        "start = time.perf_counter()\nimportlib.import_module(sys.argv[1])\n"
        "print((time.perf_counter() - start) * 1000)\n"
    )
    best: float | None = None
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", probe, module, *warm], capture_output=True, text=True
        )
        if done.returncode != 0:
            return None
        value = float(done.stdout.split()[-1])
        best = value if best is None else min(best, value)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", type=Path, help="write the allowlist the import test reads")
    args = parser.parse_args()
    found = deferred_imports()
    with tempfile.TemporaryDirectory() as folder:
        paths = loaded_on_paths(Path(folder))
    rows = []
    for target, importers in sorted(found.items()):
        kept_off = [
            name
            for name, loaded in paths.items()
            if target not in loaded and any(m in loaded for m in importers)
        ]
        cost = None
        if kept_off:
            costs = [import_cost_ms(target, paths[name], args.runs) for name in kept_off]
            known = [c for c in costs if c is not None]
            cost = max(known) if known else None
        on_a_path = any(m in loaded for loaded in paths.values() for m in importers)
        rows.append((target, len(importers), kept_off, cost, on_a_path))
    date = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    load = os.getloadavg()[0]
    print(f"# function-level imports, {date} UTC, load {load:.1f}, best of {args.runs}")
    print("| imported inside a function | importers | kept off | cost there (ms) |")
    print("|---|---|---|---|")
    for target, count, kept_off, cost, on_a_path in sorted(rows, key=lambda r: -(r[3] or -1)):
        where = ", ".join(kept_off) or _verdict(on_a_path)
        shown = f"{cost:.2f}" if cost is not None else "–"
        print(f"| `{target}` | {count} | {where} | {shown} |")
    pays = [r for r in rows if r[2]]
    anyway = [r[0] for r in rows if not r[2] and r[4]]
    print(f"\n{len(pays)} of {len(rows)} modules imported inside functions are kept off a path;")
    print(f"{len(anyway)} are loaded anyway where they are imported: {', '.join(anyway)}")
    if args.write:
        lines = [
            "# Modules cairn may import inside a function (tests/test_import_graph.py): each is",
            "# kept off a start path, measured by benchmarks/import_bench.py; the cost of",
            f"# importing it there in ms ({date} UTC, best of {args.runs}). Regenerate with",
            "# `python benchmarks/import_bench.py --write tests/deferred_imports.txt`.",
            *(
                f"{target}  # {cost:.1f} ms" if cost is not None else f"{target}"
                for target, _, kept_off, cost, _ in sorted(pays)
            ),
            "",
            "# Loaded anyway wherever a measured path imports them: the deferral gains nothing",
            "# there. Hoist each to its module's top when the module is next touched (unless that",
            "# closes an import cycle), and remove its line.",
            *(
                target
                for target, _, kept_off, _, on_a_path in sorted(rows)
                if not kept_off and on_a_path
            ),
            "",
            "# Imported only by modules off the measured paths (the TUI, cairn serve, subcommands,",
            "# an MCP connection): kept until those paths are measured too.",
            *(
                target
                for target, _, kept_off, _, on_a_path in sorted(rows)
                if not kept_off and not on_a_path
            ),
        ]
        args.write.write_text("\n".join(lines) + "\n")


def _verdict(on_a_path: bool) -> str:
    return "loaded anyway: belongs at module level" if on_a_path else "importers off these paths"


if __name__ == "__main__":
    main()
