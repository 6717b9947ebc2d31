"""``cairn demo``: a scripted session that shows cairn's features end to end, with no API key.

It starts the scripted model server from :mod:`cairn.testing` on 127.0.0.1, creates a small
project in a temporary folder and runs real sessions on the real runtime against it. Only the
model is scripted: tools run, files change, memories are written and recalled for real.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

from cairn.config.loader import Endpoint
from cairn.config.paths import user_settings_path
from cairn.config.settings import Settings
from cairn.memory.paths import memory_base
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call
from cairn.ui.render import permission_preview, permission_title
from cairn.vocabulary.events import (
    AssistantText,
    MemoryChanged,
    MemoryRecalled,
    Notice,
    SessionEvent,
    ToolCallStart,
    ToolCallUpdate,
    TurnEnded,
)
from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest, Question
from cairn.vocabulary.permissions import permission_choices

__all__ = ["run_demo"]

EXTRACT_WAIT_SECONDS = 30.0  # how long the demo waits to show what Extract saved in the background

GREET_PY = '''def greet(name: str) -> str:
    """A friendly greeting."""
    return f"Hello, {name}!"
'''
FAREWELL_PY = '''

def farewell(name: str) -> str:
    """A friendly goodbye."""
    return f"Goodbye, {name}!"
'''
PYTEST_MEMORY = """---
name: Tests use pytest
description: The user writes tests with pytest (plain asserts), never unittest
type: feedback
---

Write tests with pytest: plain `assert` statements and fixtures, no unittest.TestCase.

Why: the user said they always use pytest and never unittest.
How to apply: whenever adding or changing tests in this user's projects.
"""
RECAP = (
    "<recap>Adding farewell() to greet.py and covering both helpers with pytest tests. "
    "Next: run pytest and commit.</recap>"
)


def run_demo(
    *,
    keep: bool = False,
    console: Console | None = None,
    extract_wait: float = EXTRACT_WAIT_SECONDS,
) -> int:
    """The tour; ``extract_wait``: seconds to wait for the first session's extraction."""
    console = console or Console(highlight=False)
    with _demo_folder(keep) as folder:
        code = asyncio.run(_demo(folder, console, extract_wait))
    _next_steps(console, kept=folder if keep else None)
    return code


DEMO_HOST = "127.0.0.1"  # where the scripted model listens
_NO_PROXY = ("no_proxy", "NO_PROXY")


@contextmanager
def _demo_folder(keep: bool) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="cairn-demo-"))
    saved = {k: os.environ.get(k) for k in ("CAIRN_HOME", "CAIRN_MEMORY_LOCAL", *_NO_PROXY)}
    os.environ["CAIRN_HOME"] = str(folder / "cairn-home")
    os.environ.pop("CAIRN_MEMORY_LOCAL", None)
    for name in _NO_PROXY:  # the scripted model is reached direct, whatever proxy is set
        os.environ[name] = DEMO_HOST
    try:
        yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


class _Printer:
    """Shows session events the way a newcomer can follow them."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._streaming = False
        self.memory_events = 0

    async def __call__(self, event: SessionEvent) -> None:
        console = self.console
        if isinstance(event, AssistantText):
            if not self._streaming:
                console.print("[bold cyan]cairn ›[/] ", end="")
                self._streaming = True
            console.print(event.text, end="", markup=False)
            return
        if self._streaming:
            console.print()
            self._streaming = False
        if isinstance(event, ToolCallStart):
            console.print(f"  [yellow]⚙ {event.title}[/]", markup=True)
        elif isinstance(event, ToolCallUpdate) and event.status in ("completed", "failed"):
            mark = "✓" if event.status == "completed" else "✗"
            first = (event.output or "").strip().splitlines()[:1]
            console.print(f"    [dim]{mark} {first[0][:100] if first else event.status}[/]")
        elif isinstance(event, MemoryRecalled | MemoryChanged):
            self.memory_events += 1
            for line in event.describe().splitlines():  # as the UI's quiet memory items
                console.print(f"  [magenta]◆ {line}[/]", markup=True, highlight=False)
        elif isinstance(event, Notice) and event.source.startswith("command:"):
            pass  # the turn result shows it
        elif isinstance(event, Notice):
            console.print(f"  [magenta]• {event.text}[/]")
        elif isinstance(event, TurnEnded) and event.result.handled_locally and event.result.text:
            console.print(f"[dim]※[/] {event.result.text}")


class _DemoUser:
    """The person at the keyboard: sees each approval as the terminal UI's dialog shows it and
    allows it once."""

    interactive = True

    def __init__(self, console: Console, cwd: Path) -> None:
        self.console = console
        self.cwd = cwd

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        choices = permission_choices(request)
        lines = [
            Text(f"{number}. {choice.label}", style="bold" if number == 1 else "")
            for number, choice in enumerate(choices, 1)
        ]
        preview = permission_preview(request, self.cwd)
        body = Group(Text(request.title), *([preview] if preview else []), Text(), *lines)
        self.console.print(Panel(body, title=permission_title(request), title_align="left"))
        first = choices[0]
        self.console.print(f"[bold green]you ›[/] 1 ({first.label})")
        return first.outcome

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        return None


class _DemoModel:
    """The scripted model: answers by request purpose and by where the conversation is."""

    def __init__(self, project: Path) -> None:
        self.project = project

    def __call__(self, request: RecordedRequest) -> Reply:
        purpose = request.purpose
        if purpose == "recall-selector":
            return self._select(request)
        if purpose == "extract":
            return self._extract(request)
        if purpose == "recap":
            return reply(RECAP)
        if purpose == "main":
            return self._main(request)
        return reply("Nothing to do.")

    def _main(self, request: RecordedRequest) -> Reply:
        user = request.user_texts()[-1] if request.user_texts() else ""
        tools_done = [m for m in request.messages if m.get("role") == "tool"]
        if "What does greet.py do" in user:
            return reply(
                chunks=[
                    "`greet.py` defines one function, ",
                    "`greet(name)`, which returns a friendly ",
                    "greeting such as `Hello, Ada!`.",
                ]
            )
        if "farewell" in user:
            steps = [
                tool_call("read_file", {"file_path": "greet.py"}),
                tool_call(
                    "edit",
                    {
                        "file_path": "greet.py",
                        "old_string": '    return f"Hello, {name}!"\n',
                        "new_string": '    return f"Hello, {name}!"\n' + FAREWELL_PY,
                    },
                ),
                tool_call(
                    "run_shell_command",
                    {"command": "python3 -c 'import greet; print(greet.farewell(\"Ada\"))'"},
                ),
            ]
            if len(tools_done) < len(steps):
                return steps[len(tools_done)]
            return reply("Added `farewell(name)` to greet.py; running it prints `Goodbye, Ada!`.")
        if "Write a test" in user:
            if not tools_done:
                return tool_call(
                    "write_file",
                    {
                        "file_path": "test_greet.py",
                        "content": (
                            "from greet import farewell, greet\n\n\n"
                            "def test_greet():\n"
                            '    assert greet("Ada") == "Hello, Ada!"\n\n\n'
                            "def test_farewell():\n"
                            '    assert farewell("Ada") == "Goodbye, Ada!"\n'
                        ),
                    },
                )
            return reply(
                "Wrote `test_greet.py` with two pytest tests (plain asserts, as you prefer)."
            )
        if "pytest" in user and "never unittest" in user:
            return reply("Noted: pytest with plain asserts, never unittest. I'll stick to that.")
        return reply("Done.")

    def _select(self, request: RecordedRequest) -> Reply:
        manifest = request.last_user_text()
        paths = re.findall(r"^- \[\w+\] (\S+\.md) \(", manifest, re.MULTILINE)
        chosen = [p for p in paths if "pytest" in p or "test" in p][:1]
        return reply(json.dumps({"selected_memories": chosen}))

    def _extract(self, request: RecordedRequest) -> Reply:
        said_pytest = request.contains("never unittest")
        already = bool(request.messages) and request.messages[-1].get("role") == "tool"
        if not said_pytest or already:
            return reply("Nothing new and durable to save." if not said_pytest else "Saved.")
        match = re.search(r"(/\S+/memory)/?\s", request.system or "")
        root = match.group(1) if match else str(self.project / ".cairn" / "memory")
        return tool_call(
            "write_file",
            {"file_path": f"{root}/feedback/testing-with-pytest.md", "content": PYTEST_MEMORY},
        )


async def _demo(folder: Path, console: Console, extract_wait: float) -> int:
    project = folder / "project"
    (project / ".git").mkdir(parents=True)
    (project / "greet.py").write_text(GREET_PY)
    console.print(
        Panel.fit(
            "cairn demo: real sessions on the real runtime, with a scripted model on 127.0.0.1.\n"
            f"Project: {project}",
            title="cairn",
        )
    )
    async with ScriptedServer(handler=_DemoModel(project)) as server:
        settings = Settings()
        endpoint = Endpoint(server.base_url, "demo-key", "scripted-model")
        runtime = Runtime.from_endpoint(cwd=project, settings=settings, endpoint=endpoint)
        printer = _Printer(console)
        try:
            user = _DemoUser(console, project)
            session = runtime.new_session(frontend=user, approval_mode="default")
            unlisten = session.listen(printer)  # Extract reports after the turn, outside it
            await _turn(console, session, printer, "1. A streamed answer", "What does greet.py do?")
            await _turn(
                console,
                session,
                printer,
                "2. A turn with tool calls",
                "Add a farewell function to greet.py and run it.",
            )
            await _show_diff(console, project)
            await _turn(
                console,
                session,
                printer,
                "3. Something worth remembering",
                "By the way: I always use pytest for tests, never unittest.",
            )
            await session.close()
            await _show_saved_memory(console, runtime, printer, extract_wait)
            unlisten()
            second = runtime.new_session(frontend=user, approval_mode="default")
            await _turn(
                console, second, printer, "4. A new session remembers", "Write a test for greet.py."
            )
            await _turn(console, second, printer, "5. Where were we? (/recap)", "/recap")
            await second.close()
        finally:
            await runtime.aclose()
    return 0


async def _turn(
    console: Console, session: Session, printer: _Printer, title: str, text: str
) -> None:
    console.print(Rule(title, align="left"))
    console.print(f"[bold green]you ›[/] {text}")
    result = await session.prompt(PromptRequest(text=text), printer)
    if result.stop_reason != "end_turn":
        raise RuntimeError(f"the demo turn ended with {result.stop_reason}: {result.error}")


async def _show_diff(console: Console, project: Path) -> None:
    console.print(Markdown(f"```python\n{(project / 'greet.py').read_text()}```"))


async def _show_saved_memory(
    console: Console, runtime: Runtime, printer: _Printer, wait: float
) -> None:
    """Wait for the background extraction of the first session; the printer shows what it
    saved as the session reports it."""
    console.print(Rule("Saved to memory in the background (Extract)", align="left"))
    before = printer.memory_events
    await runtime.memory_manager().drain(timeout=wait)
    if printer.memory_events == before:
        console.print("  (nothing)")


def _next_steps(console: Console, *, kept: Path | None) -> None:
    """What to do after the demo: an endpoint, the UI, and where the memories live."""
    base = memory_base()
    lines = [
        "  1. Point cairn at your model (any OpenAI-compatible endpoint):",
        "       export OPENAI_BASE_URL=https://api.example.com/v1",
        "       export OPENAI_API_KEY=sk-...  OPENAI_MODEL=qwen3-coder-plus",
        f"     or keep them in {user_settings_path()}: security.auth.baseUrl, apiKey and",
        "     model.name (docs/configuration.md).",
        "  2. Open the terminal UI in your project:  cd your-project && cairn",
        '     or open it with a first question:      cairn "what does this project do?"',
        '     or run one turn from a script:         cairn -p "why does test_login fail?"',
        "  3. Memories are Markdown files you can read, edit and delete:",
        f"       yours, in every project:  {base / 'memories'}",
        f"       each project's:           {base / 'projects' / '<project>' / 'memory'}",
        "     `cairn memory list` shows them; `cairn memory path` shows this folder's.",
        f"  This demo's project and memories are kept in {kept}."
        if kept is not None
        else "  This demo ran in a temporary folder, now removed (`cairn demo --keep` keeps it).",
        "  More: docs/usage.md (the terminal UI) and docs/memory.md (memory).",
    ]
    console.print(Rule("What next", align="left"))
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
