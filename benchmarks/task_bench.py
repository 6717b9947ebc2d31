"""The task checkpoint's figures (issue #29): an instant recap, /context's accuracy, the upkeep.

Usage: python benchmarks/task_bench.py [--turns 30] [--recaps 50]

Everything runs in process: a real Runtime and Session over the in-process scripted model
(``cairn.testing.ScriptedProvider``, answering at once), in a temporary cairn home.

- recap: a session of ``--turns`` turns with a fresh checkpoint; ``session.recap_outcome()`` (what
  ``/recap``, the away recap and the daemon's route call) is timed ``--recaps`` times (median and
  worst), with the model requests it made, and the ``/recap`` command as typed (the recap also
  recorded and shown). Beside it, the same session with
  ``general.taskCheckpoint`` off, where the recap is a side query to the (instant) model.
- /context: for four sessions (a short chat; a tool-heavy one reading files; one with an
  attached file and context files; one compressed from the checkpoint), the estimate of
  ``/context`` (the sum of its parts) against the prompt of the last request counted on the wire
  (every message's text, tool calls' names and arguments, tool declarations as JSON, 4
  characters a token: the counting the scripted servers do, over the whole body).
- upkeep: ``--turns`` turns, each followed by the quiet time (shortened to 10 ms), plus one
  slash command after each turn; the checkpoint side queries made, per turn, and the tokens by
  purpose (``task-checkpoint`` against ``main``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cairn.agent.task_checkpoint import TASK_CHECKPOINT_PURPOSE
from cairn.config.settings import Settings
from cairn.llm.openai.format import build_request_body
from cairn.llm.types import ModelRequest
from cairn.session import task_state as task_state_module
from cairn.session.context_usage import context_report, usage_report
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.testing import Reply, ScriptedProvider, ToolCallSpec, reply, tool_calls
from cairn.vocabulary.events import SessionEvent

CHECKPOINT = {
    "objective": "Write the quarterly report.",
    "instructions": [],
    "done": [{"step": "Drafted section 1", "evidence": "wrote report.md"}],
    "remaining": ["section 2", "section 3"],
    "next_step": "Draft section 2 from the spreadsheet.",
    "open_questions": [],
    "knowledge": ["the numbers are in data.csv"],
    "recap": "Writing the quarterly report. Next: draft section 2 from the spreadsheet.",
}
FILLER = "The numbers for this part are in the spreadsheet; keep the layout. " * 4


def wire_tokens(request: ModelRequest) -> int:
    """The prompt on the wire at 4 characters a token (see the module docstring)."""
    body = build_request_body(request)
    chars = 0
    for message in body["messages"]:
        content = message.get("content") or ""
        if isinstance(content, str):
            chars += len(content)
        else:
            chars += sum(len(part.get("text", "")) for part in content)
        for call in message.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    chars += sum(len(json.dumps(tool["function"])) for tool in body.get("tools") or [])
    return chars // 4


class Bench:
    """A scripted model that answers the main turn with ``main(request)`` (counted on the wire)
    and every checkpoint query with :data:`CHECKPOINT`."""

    def __init__(self, main: Callable[[ModelRequest], Reply]) -> None:
        self.provider = ScriptedProvider(handler=self._answer)
        self._main = main

    def _answer(self, request: ModelRequest) -> Reply:
        if request.purpose == TASK_CHECKPOINT_PURPOSE:
            return reply(json.dumps(CHECKPOINT))
        if request.purpose == "recap":
            return reply("<recap>Writing the quarterly report. Next: section 2.</recap>")
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        if request.purpose == "extract":
            return reply("Nothing new worth saving.")
        answer = self._main(request) if request.purpose == "main" else reply("ok")
        usage = {"prompt_tokens": wire_tokens(request), "completion_tokens": 10}
        return dataclasses.replace(answer, usage=usage)


async def _ignore(event: SessionEvent) -> None:
    return None


def make_runtime(project: Path, bench: Bench, **settings: Any) -> Runtime:
    settings.setdefault("memory", {})["enableManagedAutoMemory"] = False
    return Runtime(cwd=project, settings=Settings.model_validate(settings), provider=bench.provider)


async def run_turns(session: Session, turns: int, *, quiet: bool = True) -> None:
    for turn in range(1, turns + 1):
        await session.prompt(
            PromptRequest(f"Turn {turn}: go on with the report. {FILLER}"), _ignore
        )
        if quiet:
            await _until(lambda: session.task_state.fresh)


async def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the checkpoint was not brought up to date")
        await asyncio.sleep(0.005)


# ----- recap -----


async def recap_figures(project: Path, turns: int, calls: int, checkpoint: bool) -> dict[str, Any]:
    bench = Bench(lambda request: reply("Done."))
    runtime = make_runtime(project, bench, general={"taskCheckpoint": checkpoint})
    session = runtime.new_session()
    try:
        await run_turns(session, turns, quiet=checkpoint)
        before = len(bench.provider.requests)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            outcome = await session.recap_outcome()
            times.append((time.perf_counter() - started) * 1000)
            assert outcome.text, outcome.reason
        made = len(bench.provider.requests) - before
        commands = []  # /recap as typed: the recap recorded and shown too
        for _ in range(calls):
            started = time.perf_counter()
            result = await session.prompt(PromptRequest("/recap"), _ignore)
            commands.append((time.perf_counter() - started) * 1000)
            assert result.text
    finally:
        await session.close()
        await runtime.aclose()
    return {
        "median": statistics.median(times),
        "worst": max(times),
        "requests": made / calls,
        "command": statistics.median(commands),
    }


# ----- /context -----


async def context_figures(root: Path) -> list[tuple[str, int, int]]:
    rows = []
    for name, shape in SHAPES.items():
        project = root / name.replace(" ", "-")
        (project / ".git").mkdir(parents=True)
        rows.append((name, *await shape(project)))
    return rows


async def _measure(
    project: Path, bench: Bench, prompts: list[Any], **settings: Any
) -> tuple[int, int]:
    runtime = make_runtime(project, bench, **settings)
    session = runtime.new_session()
    try:
        for prompt in prompts:
            request = prompt if isinstance(prompt, PromptRequest) else PromptRequest(prompt)
            if isinstance(prompt, str) and "@" in prompt:
                request = PromptRequest.attaching(await session.attach_text(prompt))
            await session.prompt(request, _ignore)
        if settings.get("compress"):
            await session.task_state.update_now()
            await session.client.compress(force=True)
            await session.prompt(PromptRequest("and now?"), _ignore)
        last = [r for r in bench.provider.requests if r.purpose == "main"][-1]
        return context_report(session).estimated, wire_tokens(last)
    finally:
        await session.close()
        await runtime.aclose()


async def _short(project: Path) -> tuple[int, int]:
    return await _measure(project, Bench(lambda r: reply("Sure.")), ["hello", "what now?"])


async def _tools(project: Path) -> tuple[int, int]:
    for n in range(3):
        (project / f"file{n}.py").write_text(f"def f{n}():\n    return {n}\n" * 200)
    calls = iter(
        [
            tool_calls(ToolCallSpec("read_file", {"file_path": str(project / f"file{n}.py")}))
            for n in range(3)
        ]
    )

    def main(request: ModelRequest) -> Reply:
        return next(calls, reply("Read them."))

    return await _measure(project, Bench(main), ["read the three files"])


async def _attached(project: Path) -> tuple[int, int]:
    (project / "CAIRN.md").write_text("Use tabs. Keep functions short.\n" * 100)
    (project / "notes.txt").write_text("a line of notes\n" * 500)
    return await _measure(project, Bench(lambda r: reply("Noted.")), ["summarise @notes.txt"])


async def _compressed(project: Path) -> tuple[int, int]:
    prompts = [f"Turn {n}: {FILLER}" for n in range(12)]
    return await _measure(
        project, Bench(lambda r: reply("Done. " + FILLER)), prompts, compress=True
    )


SHAPES = {
    "short chat": _short,
    "tool-heavy (3 file reads)": _tools,
    "attached file + CAIRN.md": _attached,
    "compressed from checkpoint": _compressed,
}


# ----- upkeep -----


async def upkeep_figures(project: Path, turns: int) -> dict[str, Any]:
    bench = Bench(lambda request: reply("Done."))
    runtime = make_runtime(project, bench)
    session = runtime.new_session()
    try:
        for turn in range(1, turns + 1):
            await session.prompt(PromptRequest(f"Turn {turn}: {FILLER}"), _ignore)
            await _until(lambda: session.task_state.fresh)
            await session.prompt(PromptRequest("/help"), _ignore)  # nothing changed
        await asyncio.sleep(0.1)  # a query the slash commands would wrongly start shows here
        queries = len(bench.provider.requests_for(TASK_CHECKPOINT_PURPOSE))
        usage = usage_report(session)["session"]
    finally:
        await session.close()
        await runtime.aclose()
    main, upkeep = usage["main"], usage[TASK_CHECKPOINT_PURPOSE]
    return {
        "queries": queries,
        "per_turn": queries / turns,
        "main_tokens": main["input_tokens"] + main["output_tokens"],
        "upkeep_tokens": upkeep["input_tokens"] + upkeep["output_tokens"],
    }


async def memory_figures(project: Path, turns: int) -> dict[str, dict[str, int]]:
    """Tokens by purpose of ``turns`` turns with managed memory on (Recall and Extract)."""
    for n in range(8):
        path = project / ".cairn" / "memory" / "project" / f"report-{n}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\nname: report-{n}\ndescription: report section {n} layout and numbers\n"
            f"type: project\n---\n\nSection {n} of the report keeps the spreadsheet layout.\n"
        )
    bench = Bench(lambda request: reply("Done."))
    runtime = make_runtime(project, bench)
    runtime.settings.memory.enable_managed_auto_memory = True
    session = runtime.new_session()
    try:
        for turn in range(1, turns + 1):
            text = f"Turn {turn}: go on with report section {turn % 8}. {FILLER}"
            await session.prompt(PromptRequest(text), _ignore)
            await runtime.memory_manager().drain(timeout=30)
            await _until(lambda: session.task_state.fresh)
        return usage_report(session)["session"]
    finally:
        await session.close()
        await runtime.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--recaps", type=int, default=50)
    args = parser.parse_args()
    task_state_module.IDLE_SECONDS = 0.01  # the quiet time after a turn, shortened
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["CAIRN_HOME"] = str(root / "home")
        projects = [root / name for name in ("recap-on", "recap-off", "upkeep")]
        for project in projects:
            (project / ".git").mkdir(parents=True)
        on = await recap_figures(projects[0], args.turns, args.recaps, checkpoint=True)
        off = await recap_figures(projects[1], args.turns, args.recaps, checkpoint=False)
        contexts = await context_figures(root / "context")
        upkeep = await upkeep_figures(projects[2], args.turns)
        (root / "memory" / ".git").mkdir(parents=True)
        os.environ["CAIRN_MEMORY_LOCAL"] = "1"  # project memory in <project>/.cairn/memory
        memory = await memory_figures(root / "memory", args.turns)
    print(f"load: {os.getloadavg()[0]:.1f}  turns: {args.turns}  recaps: {args.recaps}\n")
    print("| recap | median ms | worst ms | model requests per recap | /recap command, median ms |")
    print("|---|---:|---:|---:|---:|")
    for name, row in (("fresh checkpoint", on), ("checkpoint off (side query)", off)):
        print(
            f"| {name} | {row['median']:.2f} | {row['worst']:.2f} | {row['requests']:.0f} "
            f"| {row['command']:.2f} |"
        )
    print("\n| /context: session | estimated | counted on the wire | off by |")
    print("|---|---:|---:|---:|")
    for name, estimated, counted in contexts:
        off = 100 * (estimated - counted) / counted
        print(f"| {name} | {estimated:,} | {counted:,} | {off:+.1f} % |")
    print("\n| checkpoint upkeep | value |")
    print("|---|---:|")
    print(f"| turns (each followed by /help) | {args.turns} |")
    print(f"| checkpoint side queries | {upkeep['queries']} ({upkeep['per_turn']:.2f} per turn) |")
    print(f"| tokens: main | {upkeep['main_tokens']:,} |")
    share = 100 * upkeep["upkeep_tokens"] / upkeep["main_tokens"]
    print(f"| tokens: task-checkpoint | {upkeep['upkeep_tokens']:,} ({share:.0f} % of main) |")
    print("\n| memory on: purpose | requests' input tokens | output tokens | share of main |")
    print("|---|---:|---:|---:|")
    main_tokens = memory["main"]["input_tokens"] + memory["main"]["output_tokens"]
    for purpose, counts in memory.items():
        tokens = counts["input_tokens"] + counts["output_tokens"]
        print(
            f"| {purpose} | {counts['input_tokens']:,} | {counts['output_tokens']:,} "
            f"| {100 * tokens / main_tokens:.0f} % |"
        )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
