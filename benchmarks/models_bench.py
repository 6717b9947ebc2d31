"""Issue 14's figures: start-up of the OpenAI path, the Anthropic provider's import cost, and
the share of prompt tokens read from the cache over a 10-turn session.

    python benchmarks/models_bench.py [--runs 15] [--baseline /tmp/base/src]

Import times are the CPU time of the imports, medians over fresh interpreters (bytecode
cached), measured interleaved with
``--baseline`` (a ``src`` folder of an older tree) when given, so the machine's drift hits both
alike. The cache share runs a real session (runtime, agent loop, provider) against the scripted
server reporting cache hits as an endpoint with a marked-prefix cache does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
TURNS = 10
OPENAI_PATH = "import cairn.cli.main, cairn.headless.runner, cairn.llm.openai"
# CPU time, not wall time: the machine is shared, and a process waiting for a core is not slower.
PROBE = """
import sys, time
t = time.process_time()
{imports}
first = time.process_time() - t
t = time.process_time()
import cairn.llm.anthropic
second = time.process_time() - t
print(first * 1000, second * 1000, "cairn.llm.anthropic" in sys.modules)
"""
STARTUP = """
import sys, time
t = time.process_time()
{imports}
print((time.process_time() - t) * 1000, "cairn.llm.anthropic" in sys.modules)
"""


def run_probe(src: Path, code: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def import_figures(runs: int, baseline: Path | None) -> None:
    trees = [("this tree", SRC)] + ([("baseline", baseline)] if baseline else [])
    startup: dict[str, list[float]] = {name: [] for name, _ in trees}
    loaded: dict[str, bool] = {}
    anthropic: list[float] = []
    for src in (s for _, s in trees):  # warm the bytecode caches
        run_probe(src, STARTUP.format(imports=OPENAI_PATH))
    for _ in range(runs):
        for name, src in trees:
            ms, seen = run_probe(src, STARTUP.format(imports=OPENAI_PATH))
            startup[name].append(float(ms))
            loaded[name] = seen == "True"
        _, extra, _ = run_probe(SRC, PROBE.format(imports=OPENAI_PATH))
        anthropic.append(float(extra))
    print(f"\nCPU time to import the `cairn -p` path (`{OPENAI_PATH}`), {runs} interpreters each\n")
    print("| tree | median | min | cairn.llm.anthropic imported |")
    print("|---|---|---|---|")
    for name, values in startup.items():
        print(
            f"| {name} | {statistics.median(values):.1f} ms | {min(values):.1f} ms "
            f"| {'yes' if loaded[name] else 'no'} |"
        )
    print(
        f"\n`import cairn.llm.anthropic` on top of that path: median "
        f"{statistics.median(anthropic):.1f} ms (min {min(anthropic):.1f} ms)"
    )


async def cache_share(wire: str, caching: str) -> tuple[int, int]:
    """Input and cached tokens over a 10-turn session (each turn: a tool call, then the answer)."""
    from cairn.config.endpoint import Endpoint
    from cairn.config.settings import Settings
    from cairn.session.runtime import Runtime
    from cairn.session.session import PromptRequest
    from cairn.testing import ScriptedServer, reply, tool_call
    from cairn.vocabulary.events import SessionEvent

    with tempfile.TemporaryDirectory() as folder, ScriptedServer(prompt_cache="marked") as server:
        workspace = Path(folder)
        os.environ["CAIRN_HOME"] = str(workspace / "home")
        (workspace / "notes.md").write_text("# Notes\n" + "A line of project notes.\n" * 200)
        for _ in range(TURNS):
            server.enqueue(tool_call("read_file", {"file_path": "notes.md"}), reply("Read it."))
        settings = Settings.model_validate(
            {"memory": {"enableManagedAutoMemory": False}, "model": {"promptCaching": caching}}
        )
        endpoint = Endpoint(server.base_url, "k", "bench-model", wire=wire)  # type: ignore[arg-type]
        runtime = Runtime.from_endpoint(cwd=workspace, settings=settings, endpoint=endpoint)
        session = runtime.new_session(approval_mode="yolo")

        async def ignore(event: SessionEvent) -> None:
            return None

        total = cached = 0
        for turn in range(TURNS):
            result = await session.prompt(
                PromptRequest(f"question {turn}: what do the notes say?"), ignore
            )
            total += result.usage.input_tokens
            cached += result.usage.cached_tokens
        await session.close()
        await runtime.aclose()
    return total, cached


def cache_figures() -> None:
    cases = [
        ("OpenAI wire, `promptCaching: on` (marks sent)", "openai", "on"),
        ("OpenAI wire, `auto` on an unknown host (no marks)", "openai", "auto"),
        ("Anthropic wire (breakpoints by default)", "anthropic", "auto"),
        ("Anthropic wire, `promptCaching: off`", "anthropic", "off"),
    ]
    print(f"\nCached share of prompt tokens, one session of {TURNS} turns (20 model requests)\n")
    print("| case | prompt tokens | read from the cache | share |")
    print("|---|---|---|---|")
    for label, wire, caching in cases:
        total, cached = asyncio.run(cache_share(wire, caching))
        share = 100 * cached / total if total else 0.0
        print(f"| {label} | {total:,} | {cached:,} | {share:.0f} % |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--baseline", type=Path, help="a src/ folder of an older tree")
    args = parser.parse_args()
    import_figures(args.runs, args.baseline)
    cache_figures()


if __name__ == "__main__":
    main()
