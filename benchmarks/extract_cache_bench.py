"""What a provider's prompt cache can serve of Extract's input, and what it costs.

Usage: python benchmarks/extract_cache_bench.py [--turns 30]

Two sessions of ``--turns`` turns with managed memory on (8 project memories), each turn followed
by its Extract and the task checkpoint, in process over the scripted model (``task_bench.py``'s
``Bench``): "short turns" is ``task_bench.py``'s "memory on" session (a 300-character prompt, a
one-word answer); in "two file reads a turn" the main agent reads two 6 KB files before it
answers, and Extract writes a new memory every fifth turn.

Every model request of a session is rendered as the providers would send it and fed, in order,
to the scripted server's prompt cache (:class:`cairn.testing.cache.PromptCache`, ``"marked"``):
the Anthropic wire with cairn's cache breakpoints, where a request reads the longest prefix an
earlier one marked. The "automatic" columns are the longest prefix (whole blocks) a request
shares with any earlier request on the OpenAI wire: what OpenAI's and DeepSeek's automatic
caching can serve at best. Tokens are four characters (tool declarations as JSON).

Each session is measured with Extract's requests as sent (``today``) and reshaped (see
:func:`reshaped`): the conversation window as it was until the window moved in steps, the last
40 entries (``sliding 40``), the reference system's fork of the main conversation (``whole``),
and the main agent's system prompt and tools in front of Extract's own conversation
(``tools``). Printed: input
tokens, the share of Extract's input that is a byte-identical prefix of the main agent's last
request before it, the share read from the cache, and the input cost in uncached-token units at
Anthropic's prices (uncached 1, cache write 1.25, cache read 0.1; "automatic": read 0.1, no
write price).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from task_bench import FILLER, Bench, _ignore, _until, make_runtime

from cairn.content import Content, FunctionResponse, Text
from cairn.llm.anthropic.format import AnthropicOptions
from cairn.llm.anthropic.format import build_request_body as anthropic_body
from cairn.llm.openai.format import WireOptions
from cairn.llm.openai.format import build_request_body as openai_body
from cairn.llm.types import ModelRequest
from cairn.memory.background.extract import (
    EXTRACT_HISTORY_ENTRIES,
    EXTRACT_TASK,
    extraction_history,
)
from cairn.session import task_state as task_state_module
from cairn.session.session import PromptRequest
from cairn.testing import Reply, ToolCallSpec, reply, tool_call, tool_calls
from cairn.testing.anthropic_wire import anthropic_blocks
from cairn.testing.cache import Block, PromptCache, openai_blocks
from cairn.values import replace

SHAPES = ("today", "sliding 40", "whole", "tools")
READ, WRITE = 0.1, 1.25  # Anthropic's price of a cached input token read, and written


class ToolBench(Bench):
    """:class:`Bench` whose main agent reads two files a turn, and whose Extract writes a new
    memory every fifth turn (the memory list in its prompt changes then)."""

    def __init__(self, project: Path) -> None:
        super().__init__(self._main)
        self.project = project
        self.turn = 0

    def _main(self, request: ModelRequest) -> Reply:
        if any(isinstance(p, FunctionResponse) for p in request.contents[-1].parts):
            return reply("Done.")
        files = [self.project / f"part{self.turn % 4}-{n}.txt" for n in range(2)]
        return tool_calls(*(ToolCallSpec("read_file", {"file_path": str(f)}) for f in files))

    def _answer(self, request: ModelRequest) -> Reply:
        if request.purpose != "extract":
            return super()._answer(request)
        if self.turn % 5 or _task_index(request.contents) != len(request.contents) - 1:
            return reply("Nothing new worth saving.")
        path = self.project / ".cairn" / "memory" / "project" / f"note-{self.turn}.md"
        text = (
            f"---\nname: note-{self.turn}\ndescription: a decision of turn {self.turn}\n"
            f"type: project\n---\n\nTurn {self.turn} settled the layout of its section.\n"
        )
        return tool_call("write_file", {"file_path": str(path), "content": text})


async def session_requests(project: Path, turns: int, *, tools: bool) -> list[ModelRequest]:
    """The model requests of ``turns`` turns with managed memory on, in the order sent."""
    for n in range(8):
        path = project / ".cairn" / "memory" / "project" / f"report-{n}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\nname: report-{n}\ndescription: report section {n} layout and numbers\n"
            f"type: project\n---\n\nSection {n} of the report keeps the spreadsheet layout.\n"
        )
    for n in range(8):
        (project / f"part{n // 2}-{n % 2}.txt").write_text(f"line {n} of the data\n" * 300)
    bench = ToolBench(project) if tools else Bench(lambda request: reply("Done."))
    runtime = make_runtime(project, bench)
    runtime.settings.memory.enable_managed_auto_memory = True
    session = runtime.new_session()
    try:
        for turn in range(1, turns + 1):
            if isinstance(bench, ToolBench):
                bench.turn = turn
            text = f"Turn {turn}: go on with report section {turn % 8}. {FILLER}"
            await session.prompt(PromptRequest(text), _ignore)
            await runtime.memory_manager().drain(timeout=30)
            await _until(lambda: session.task_state.fresh)
        return list(bench.provider.requests)
    finally:
        await session.close()
        await runtime.aclose()


def _task_index(contents: Sequence[Content]) -> int:
    """Where Extract's task message is in one of its requests (its own calls follow it)."""
    for index in range(len(contents) - 1, -1, -1):
        if any(isinstance(p, Text) and p.text == EXTRACT_TASK for p in contents[index].parts):
            return index
    raise ValueError("not an Extract request")


def _shared(blocks: list[Block], earlier: list[Block]) -> int:
    """Characters of the longest run of whole blocks ``blocks`` and ``earlier`` start with."""
    shared = 0
    for block, other in zip(blocks, earlier, strict=False):
        if block.key != other.key:
            break
        shared += block.chars
    return shared


def reshaped(requests: list[ModelRequest], shape: str) -> list[ModelRequest]:
    """The session's requests with each Extract request in ``shape``:

    - ``today``: as sent;
    - ``tools``: the main agent's system prompt and tool declarations, then Extract's
      conversation (cleaned, as today), then its instructions (today's system prompt and task)
      as the last user message;
    - ``whole``: the main agent's last request as sent (system prompt, tools, every message),
      its final answer, then Extract's instructions as the last user message;
    - ``sliding 40``: as sent before the window moved in steps (d455926): the last 40 entries,
      so past 40 entries the conversation's start moved with every turn.
    """
    if shape == "today":
        return requests
    out: list[ModelRequest] = []
    main: ModelRequest | None = None
    for request in requests:
        if request.purpose == "main":
            main = request
        if request.purpose != "extract" or main is None:
            out.append(request)
            continue
        task = _task_index(request.contents)
        own = request.contents[task + 1 :]  # the run's own calls and results
        answer = request.contents[task - 1]  # the turn's final answer (as main holds it)
        history = [*main.contents, answer]
        if shape == "sliding 40":
            window = extraction_history(history[-EXTRACT_HISTORY_ENTRIES:])
            contents = [*window, request.contents[task], *own]
            out.append(replace(request, contents=contents))
            continue
        rules = Content("user", [Text(f"{request.system}\n\n{EXTRACT_TASK}")])
        if shape == "tools":
            contents = [*request.contents[:task], rules, *own]
        else:
            contents = [*main.contents, answer, rules, *own]
        out.append(replace(request, system=main.system, tools=main.tools, contents=contents))
    return out


def figures(requests: list[ModelRequest]) -> dict[str, dict[str, float]]:
    marked = PromptCache("marked")
    rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    last_main: list[Block] | None = None
    seen: list[list[Block]] = []  # every earlier request (OpenAI-wire blocks)
    for request in requests:
        wire_a = anthropic_blocks(anthropic_body(request, AnthropicOptions()))
        wire_o = openai_blocks(openai_body(request, WireOptions()))
        use = marked.use(wire_a)
        row = rows[request.purpose]
        row["requests"] += 1
        row["tokens"] += use.prompt_tokens
        row["read"] += use.cached_tokens
        row["written"] += use.written_tokens
        row["tokens_o"] += _chars(wire_o) // 4
        row["read_o"] += max((_shared(wire_o, earlier) for earlier in seen), default=0) // 4
        seen.append(wire_o)
        if request.purpose == "main":
            last_main = wire_a
        elif last_main is not None:
            row["shared"] += _shared(wire_a, last_main) // 4
    return rows


def _chars(blocks: list[Block]) -> int:
    return sum(block.chars for block in blocks)


def cost(row: dict[str, float]) -> float:
    """Input cost in uncached-token units at Anthropic's prices."""
    plain = row["tokens"] - row["read"] - row["written"]
    return plain + READ * row["read"] + WRITE * row["written"]


def cost_automatic(row: dict[str, float]) -> float:
    """Input cost in uncached-token units, a cached token at 0.1 and no write price."""
    return row["tokens_o"] - row["read_o"] + READ * row["read_o"]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    task_state_module.IDLE_SECONDS = 0.01
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["CAIRN_HOME"] = str(root / "home")
        os.environ["CAIRN_MEMORY_LOCAL"] = "1"
        sessions = {}
        for name, tools in (("short turns", False), ("two file reads a turn", True)):
            project = root / name.replace(" ", "-")
            (project / ".git").mkdir(parents=True)
            sessions[name] = await session_requests(project, args.turns, tools=tools)
    print(f"load: {os.getloadavg()[0]:.1f}  turns: {args.turns}\n")
    print(
        "| session | Extract's request | purpose | requests | input tokens | % of main's "
        "| prefix of main's last request | read from cache (Anthropic) "
        "| cost at cached prices (Anthropic) | % of main's cost "
        "| read from cache (automatic) | % of main's cost (automatic, 0.1) |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (name, requests), shape in itertools.product(sessions.items(), SHAPES):
        rows = figures(reshaped(requests, shape))
        main_row = rows["main"]
        for purpose in ("main", "extract") if shape == "today" else ("extract",):
            row = rows[purpose]
            shared = f"{100 * row['shared'] / row['tokens']:.0f} %" if purpose != "main" else "–"
            print(
                f"| {name} | {shape} | {purpose} | {row['requests']:.0f} | {row['tokens']:,.0f} "
                f"| {100 * row['tokens'] / main_row['tokens']:.0f} % | {shared} "
                f"| {100 * row['read'] / row['tokens']:.0f} % | {cost(row):,.0f} "
                f"| {100 * cost(row) / cost(main_row):.0f} % "
                f"| {100 * row['read_o'] / row['tokens_o']:.0f} % "
                f"| {100 * cost_automatic(row) / cost_automatic(main_row):.0f} % |"
            )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
