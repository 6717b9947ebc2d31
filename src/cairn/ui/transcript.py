"""The conversation as widgets: one widget per history item, built from live events or a replay.

Text that did not come from cairn (the model's, a tool's, a file's, a server's) is shown with its
control characters and bidi overrides as visible escapes (``shown``), whether live or replayed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Collapsible, Markdown, Static
from textual.widgets.markdown import MarkdownStream

from cairn.recording.replay import ReplayItem
from cairn.session.updates import ENDING_TEXT
from cairn.ui.render import display_path, recap_text, render_diff
from cairn.ui.subagent_view import STATUS_MARKS, SubagentView
from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    MemoryChanged,
    MemoryRecalled,
    MemoryRef,
    Notice,
    PlanUpdate,
    SessionEvent,
    StreamReset,
    SubagentUpdate,
    ToolCallStart,
    ToolCallUpdate,
    ToolStatus,
    TurnEnded,
)
from cairn.vocabulary.terminal import escape_for_terminal as shown
from cairn.vocabulary.tool_calls import FileDiff, TodoItem, ToolKind

__all__ = [
    "AssistantView",
    "MemoryView",
    "NoticeView",
    "PlanView",
    "RecapView",
    "ShellView",
    "SteerView",
    "SubagentView",
    "ThoughtView",
    "ToolCallView",
    "ToolOutput",
    "Transcript",
    "TurnRenderer",
    "UserView",
    "display_path",
    "recap_text",
    "render_diff",
    "replay_widgets",
]

MAX_ARGS_CHARS = 160  # a tool call's arguments shown on one line, when they fit
MAX_ARGS_LINES = 12  # lines of a tool call's arguments shown as indented JSON
MAX_ARG_STRING_CHARS = 200  # of one string argument shown
TOOL_PREVIEW_LINES = 5  # lines of a tool's output shown before "… +N lines"
SHELL_PREVIEW_LINES = 20  # lines of a `!cmd`'s output shown before "… +N lines"
MAX_EXPANDED_LINES = 500  # lines an expanded output shows (the model got all of it)
EXPAND_HINT = "(ctrl+o to expand)"
COLLAPSE_HINT = "(ctrl+o to collapse)"
_TODO_MARKS = {"pending": "☐", "in_progress": "◐", "completed": "☑", "cancelled": "⊘"}
_NOTICE_STYLES = {"info": ("ℹ", "cyan"), "warning": ("⚠", "yellow"), "error": ("✗", "red")}


class Transcript(VerticalScroll):
    """The scrolling history; it follows new content until the user scrolls up."""

    can_focus = False

    async def add(self, *widgets: Widget) -> None:
        await self.mount_all(widgets)


class UserView(Static):
    def __init__(self, text: str) -> None:
        super().__init__(Text.assemble(("› ", "bold"), (shown(text), "bold")), classes="user")


class SteerView(Static):
    """A message typed while the agent worked: it reaches the model with the next tool results."""

    def __init__(self, text: str) -> None:
        super().__init__(
            Text.assemble(
                ("↳ ", "bold"), (shown(text), ""), ("  (sent while the agent works)", "dim")
            ),
            classes="steer",
        )


class AssistantView(Markdown):
    """The model's answer, rendered as Markdown while it streams."""

    def __init__(self, markdown: str = "") -> None:
        super().__init__(shown(markdown), classes="assistant")


class ThoughtView(Collapsible):
    """The model's reasoning, collapsed under one line."""

    def __init__(self, text: str = "", *, done: bool = True) -> None:
        self._text = shown(text)
        self._body = Static(Text(self._text, style="dim italic"), classes="thought-body")
        super().__init__(self._body, title="Thought" if done else "Thinking…", collapsed=True)
        self.add_class("thought")

    @property
    def text(self) -> str:
        return self._text

    def append(self, fragment: str) -> None:
        self._text += shown(fragment)
        self._body.update(Text(self._text, style="dim italic"))

    def finish(self) -> None:
        self.title = "Thought"


class ToolOutput(Vertical):
    """What a tool printed: its first lines (or a summary), the rest behind an expander.

    ``summary`` (``Found 3 files``) stands in for the whole output until it is expanded;
    without one the first ``preview_lines`` are shown and ``note`` (``exit 0``) joins the
    ``… +N lines`` line.
    """

    def __init__(
        self,
        output: str,
        *,
        summary: str | None = None,
        note: str | None = None,
        preview_lines: int = TOOL_PREVIEW_LINES,
        style: str = "",
    ) -> None:
        super().__init__(classes="tool-output")
        output, summary, note = shown(output), _shown_or_none(summary), _shown_or_none(note)
        lines = output.rstrip("\n").splitlines()
        if summary is not None:
            head, rest = [], lines
            title = summary
        else:
            head, rest = lines[:preview_lines], lines[preview_lines:]
            title = f"… +{len(rest)} lines" + (f" · {note}" if note else "")
        self._style = style
        self._head = "\n".join(head)
        self._rest = rest
        self._title = title
        self.preview = Static(Text(self._head, style=style)) if head else None
        self.expander: Collapsible | None = None
        self._summary: Static | None = None
        if rest:
            body = Static(_bounded(rest, style), classes="tool-output-rest")
            self.expander = Collapsible(
                body, title=f"{title} {EXPAND_HINT}", collapsed=True, classes="tool-expander"
            )
        elif summary is not None:
            self._summary = Static(Text(summary, style="dim"))

    def compose(self) -> Any:
        for part in (self.preview, self.expander, self._summary):
            if part is not None:
                yield part

    @property
    def expandable(self) -> bool:
        return self.expander is not None

    @property
    def expanded(self) -> bool:
        return self.expander is not None and not self.expander.collapsed

    def set_expanded(self, expanded: bool) -> None:
        if self.expander is not None:
            self.expander.collapsed = not expanded

    def shown_text(self) -> str:
        """The text on screen now (the preview, plus the rest when expanded)."""
        parts = [self._head] if self._head else []
        if self.expanded:
            parts.append("\n".join(self._rest))
        elif self.expander is not None or self._summary is not None:
            parts.append(self._title)
        return "\n".join(parts)

    def on_collapsible_expanded(self, event: Collapsible.Expanded) -> None:
        event.stop()
        if self.expander is not None:
            self.expander.title = f"{self._title} {COLLAPSE_HINT}"

    def on_collapsible_collapsed(self, event: Collapsible.Collapsed) -> None:
        event.stop()
        if self.expander is not None:
            self.expander.title = f"{self._title} {EXPAND_HINT}"


def _bounded(lines: Sequence[str], style: str) -> Text:
    shown = Text("\n".join(lines[:MAX_EXPANDED_LINES]), style=style)
    if len(lines) > MAX_EXPANDED_LINES:
        shown.append(f"\n… {len(lines) - MAX_EXPANDED_LINES} more lines", style="dim")
    return shown


class ToolCallView(Vertical):
    """One tool call: status, title, arguments, then its output or diff."""

    def __init__(
        self,
        call_id: str,
        name: str,
        title: str,
        args: Mapping[str, Any],
        *,
        kind: ToolKind | None = None,
        base: Path | None = None,
    ) -> None:
        super().__init__(classes="tool")
        self.base = base
        self.call_id = call_id
        self.tool_name = name
        self.tool_title = shown(title, keep_newlines=False)
        self.tool_kind = kind
        self.args = dict(args)
        self.status: ToolStatus = "pending"
        self._header = Static(self._header_text(), classes="tool-header")
        shown_args = shown(_format_args(self.args, title))
        self._args = Static(Text(shown_args, style="dim"), classes="tool-args")
        self._args.display = bool(shown_args)
        self._body: Widget | None = None
        self.subagent: SubagentView | None = None  # an agent call's subagent at work

    def compose(self) -> Any:
        yield self._header
        yield self._args
        if self.subagent is not None:
            yield self.subagent
        if self._body is not None:  # a replayed call gets its result before it is mounted
            yield self._body

    def set_status(self, status: ToolStatus) -> None:
        self.status = status
        self._header.update(self._header_text())

    def show_result(
        self,
        output: str | None,
        *,
        display: str | None = None,
        diff: FileDiff | None = None,
        error: bool = False,
    ) -> None:
        """Show what the call produced: a diff, an error, the output, or a summary of it.

        A command's output is shown (clipped); a tool that summarises its output for people
        (``Found 3 files``, ``Read lines 1-40 of 90``) shows the summary, expandable.
        """
        body = self._result_widget(output or "", display, diff, error)
        if body is None:
            return
        if diff is not None:
            self._args.display = False  # the diff shows what the arguments said
        if self._body is not None and self._body.is_mounted:
            self._body.remove()
        self._body = body
        if self.is_mounted:
            self.mount(body)

    def _result_widget(
        self, output: str, display: str | None, diff: FileDiff | None, error: bool
    ) -> Widget | None:
        if diff is not None:
            return Static(render_diff(diff, self.base) or "", classes="tool-body")
        if error:
            return ToolOutput(output or display or "", style="red") if output or display else None
        if self.tool_kind is ToolKind.EXECUTE:
            output = _printed(output, display)
        summary = display if display and display.strip() != output.strip() else None
        if not output.strip():
            return ToolOutput(summary) if summary else None
        if summary is not None and self.tool_kind is not ToolKind.EXECUTE:
            return ToolOutput(output, summary=summary)
        return ToolOutput(output, note=summary)

    def subagent_update(self, event: SubagentUpdate) -> None:
        """Show what the subagent this call runs did, in a collapsible under the call."""
        if self.subagent is None:
            self.subagent = SubagentView(event.agent_type)
            if self.is_mounted:
                self.mount(self.subagent, after=self._args)
        self.subagent.update_from(event.event)

    def update_from(self, event: ToolCallUpdate) -> None:
        self.set_status(event.status)
        if event.status == "cancelled":  # what people read, not what the model was told
            self.show_ending(event.ending or "cancelled")
        elif event.status in ("completed", "failed"):
            self.show_result(
                event.output,
                display=event.display,
                diff=event.diff,
                error=event.status == "failed",
            )

    def show_ending(self, ending: str) -> None:
        """A call that did not run to its end: ``Rejected``, ``Skipped: ...``, ``Cancelled``."""
        text = ENDING_TEXT.get(ending, ENDING_TEXT["cancelled"])
        body = Static(Text(text, style="dim"), classes="tool-body")
        if self._body is not None and self._body.is_mounted:
            self._body.remove()
        self._body = body
        if self.is_mounted:
            self.mount(body)

    def _header_text(self) -> Text:
        mark, style = STATUS_MARKS.get(self.status, ("•", ""))
        return Text.assemble((f"{mark} ", style), (self.tool_title or self.tool_name, "bold"))


class NoticeView(Static):
    def __init__(self, level: str, text: str) -> None:
        mark, style = _NOTICE_STYLES.get(level, ("•", ""))
        body_style = style if level != "info" else ""
        super().__init__(Text.assemble((f"{mark} ", style), (shown(text), body_style)))
        self.add_class("notice", f"notice-{level}")


class MemoryView(Vertical):
    """Memory at work, visibly not an answer (dim): the memories recalled into a turn (their
    names; expand for their files), or what was saved, updated or removed (name, file, and
    the command that shows it)."""

    DEFAULT_CSS = """
    MemoryView { height: auto; padding: 0 1; color: $text-muted; }
    MemoryView Collapsible { border: none; padding: 0; }
    """

    def __init__(self, event: MemoryRecalled | MemoryChanged) -> None:
        super().__init__(classes="memory")
        self.event = event

    @property
    def text(self) -> str:
        """What the item says, as plain text (its files included)."""
        if isinstance(self.event, MemoryChanged):
            return self.event.describe()
        files = "\n".join(_recalled_line(ref) for ref in self.event.memories)
        return f"{self.event.describe()}\n{files}"

    def compose(self) -> Any:
        if isinstance(self.event, MemoryChanged):
            yield Static(Text(f"◆ {self.event.describe()}", style="dim"))
            return
        files = "\n".join(f"  {_recalled_line(ref)}" for ref in self.event.memories)
        title = f"◆ {self.event.describe()}"
        with Collapsible(title=title, collapsed=True):
            yield Static(Text(files, style="dim"))


def _recalled_line(ref: MemoryRef) -> str:
    """A recalled memory's name and file, and why it may be stale when it may."""
    line = f"{ref.name} — {ref.path}"
    return f"{line}\n    {ref.note}" if ref.note else line


class RecapView(Static):
    """``※ recap: …``: visibly not an answer from the model (dim, bold label, italic text)."""

    def __init__(self, text: str) -> None:
        super().__init__(recap_text(shown(text)), classes="recap")
        self.text = text


class ShellView(Vertical):
    """``!cmd`` and what it printed (clipped like a tool's output, expandable)."""

    def __init__(self, command: str) -> None:
        super().__init__(classes="shell")
        self.command = command
        self._status_line = Static(Text("running…", style="dim"), classes="shell-output")
        self.output: ToolOutput | None = None

    def compose(self) -> Any:
        yield Static(Text.assemble(("! ", "bold magenta"), (self.command, "bold")))
        yield self._status_line

    def show(self, output: str, exit_code: int | None, *, note: str = "") -> None:
        status = f"exit {exit_code}" if exit_code is not None else "stopped"
        self._status_line.update(Text(f"[{status}{'; ' + note if note else ''}]", style="dim"))
        if output.strip():
            self.output = ToolOutput(output, preview_lines=SHELL_PREVIEW_LINES)
            self.output.add_class("shell-output")
            self.mount(self.output, before=self._status_line)


class PlanView(Static):
    """The todo list the model keeps with ``todo_write``."""

    def __init__(self, todos: Sequence[TodoItem]) -> None:
        super().__init__(_plan_text(todos), classes="plan")

    def set_todos(self, todos: Sequence[TodoItem]) -> None:
        self.update(_plan_text(todos))


def _shown_or_none(text: str | None) -> str | None:
    return None if text is None else shown(text)


def _printed(output: str, display: str | None) -> str:
    """What a command printed, without the lines written for the model: the ``Exit code: N``
    trailer (``display`` already says ``exit N``) and the ``(no output)`` placeholder."""
    if display and display.startswith("exit "):
        trailer = f"\n\nExit code: {display.removeprefix('exit ')}"
        output = output.removesuffix(trailer)
    return "" if output.strip() == "(no output)" else output


def _format_args(args: Mapping[str, Any], title: str = "") -> str:
    """The arguments without the string values the title already shows: one line when that
    fits, else indented JSON (at most :data:`MAX_ARGS_LINES` lines, long strings cut)."""
    args = {k: v for k, v in args.items() if not (isinstance(v, str) and v and v in title)}
    if not args:
        return ""
    try:
        line = json.dumps(args, ensure_ascii=False, separators=(", ", ": "), default=str)
        nested = any(isinstance(v, dict | list) for v in args.values())
        if len(line) <= MAX_ARGS_CHARS and not nested:
            return line
        lines = json.dumps(_cut(args), ensure_ascii=False, indent=2, default=str).splitlines()
    except (TypeError, ValueError, RecursionError):
        return str(args)[: MAX_ARGS_CHARS - 1] + "…"
    if len(lines) > MAX_ARGS_LINES:
        lines = [*lines[: MAX_ARGS_LINES - 1], f"  … {len(lines) - MAX_ARGS_LINES + 1} more lines"]
    return "\n".join(lines)


def _cut(value: Any) -> Any:
    """``value`` with every string over :data:`MAX_ARG_STRING_CHARS` cut (shown, not sent)."""
    if isinstance(value, str) and len(value) > MAX_ARG_STRING_CHARS:
        return value[: MAX_ARG_STRING_CHARS - 1] + "…"
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value


def _plan_text(todos: Sequence[TodoItem]) -> Text:
    text = Text("Plan", style="bold")
    for item in todos:
        style = "dim strike" if item.status in ("completed", "cancelled") else ""
        content = shown(item.content, keep_newlines=False)
        text.append(f"\n{_TODO_MARKS.get(item.status, '•')} {content}", style=style)
    return text


class TurnRenderer:
    """Turns the events of a running turn into widgets in the transcript."""

    def __init__(self, transcript: Transcript, cwd: Path | None = None) -> None:
        self.transcript = transcript
        self.cwd = cwd
        self._answer: AssistantView | None = None
        self._stream: MarkdownStream | None = None
        self._thought: ThoughtView | None = None
        self._tools: dict[str, ToolCallView] = {}
        self._plan: PlanView | None = None

    async def handle(self, event: SessionEvent) -> None:
        if isinstance(event, AssistantText):
            await self._text(event.text)
        elif isinstance(event, AssistantThought):
            await self._thinking(event.text)
        elif isinstance(event, AssistantMessage):
            await self._message(event)
        elif isinstance(event, StreamReset):
            await self._reset(event)
        elif isinstance(event, ToolCallStart):
            await self.end_response()
            view = ToolCallView(
                event.call_id, event.name, event.title, event.args, kind=event.kind, base=self.cwd
            )
            self._tools[event.call_id] = view
            await self.transcript.add(view)
        elif isinstance(event, ToolCallUpdate):
            await self._tool_update(event)
        elif isinstance(event, SubagentUpdate):
            parent = self._tools.get(event.parent_call_id)
            if parent is not None:
                parent.subagent_update(event)
        elif isinstance(event, PlanUpdate):
            await self._plan_update(event.todos)
        elif isinstance(event, Notice):
            await self.transcript.add(NoticeView(event.level, event.text))
        elif isinstance(event, MemoryRecalled | MemoryChanged) and event.memories:
            await self.end_response()
            await self.transcript.add(MemoryView(event))
        elif isinstance(event, TurnEnded):
            await self._ended(event)

    async def end_response(self) -> None:
        """The model's current response is complete: stop streaming into it."""
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        if self._thought is not None:
            self._thought.finish()
        self._answer = None
        self._thought = None

    async def _text(self, fragment: str) -> None:
        if self._answer is None:
            self._answer = AssistantView()
            await self.transcript.add(self._answer)
            self._stream = Markdown.get_stream(self._answer)
        if self._stream is not None:
            await self._stream.write(shown(fragment))

    async def _thinking(self, fragment: str) -> None:
        if self._thought is None:
            self._thought = ThoughtView(done=False)
            await self.transcript.add(self._thought)
        self._thought.append(fragment)

    async def _message(self, event: AssistantMessage) -> None:
        if self._answer is None and event.text:
            await self.transcript.add(AssistantView(event.text))
        if self._thought is None and event.thought:
            await self.transcript.add(ThoughtView(event.thought))
        await self.end_response()

    async def _reset(self, event: StreamReset) -> None:
        stale = [w for w in (self._answer, self._thought) if w is not None]
        await self.end_response()
        for widget in stale:
            await widget.remove()
        text = event.describe()
        await self.transcript.add(NoticeView("warning", text[:1].upper() + text[1:]))

    async def _tool_update(self, event: ToolCallUpdate) -> None:
        view = self._tools.get(event.call_id)
        if view is None:  # an update without a start (a skipped call): still show it
            view = ToolCallView(event.call_id, "tool", event.call_id, {}, base=self.cwd)
            self._tools[event.call_id] = view
            await self.transcript.add(view)
        view.update_from(event)

    async def _plan_update(self, todos: Sequence[TodoItem]) -> None:
        if self._plan is None:
            self._plan = PlanView(todos)
            await self.transcript.add(self._plan)
        else:
            self._plan.set_todos(todos)

    async def _ended(self, event: TurnEnded) -> None:
        await self.end_response()
        self._tools.clear()
        self._plan = None
        result = event.result
        if result.stop_reason == "cancelled":
            await self.transcript.add(NoticeView("warning", "Cancelled."))
        elif result.stop_reason == "error":
            detail = result.error or "unknown error"
            await self.transcript.add(NoticeView("error", f"The model request failed: {detail}"))


TitleOf = Callable[[str, Mapping[str, Any]], str]
KindOf = Callable[[str], "ToolKind | None"]


def replay_widgets(
    items: Sequence[ReplayItem],
    steering: set[str] | None = None,
    *,
    title_of: TitleOf | None = None,
    kind_of: KindOf | None = None,
    base: Path | None = None,
    command_notes: Mapping[str, str] | None = None,
) -> list[Widget]:
    """Widgets for a resumed session's history, the same as the live ones.

    ``steering`` holds the uuids of mid-turn messages; ``title_of`` names a tool call as the
    live view did (``Edit src/a.py``) and ``kind_of`` says what a tool does, so its output is
    shown as it was live; ``command_notes``: what the front end itself added after a command
    (by name), as it did live.
    """
    widgets: list[Widget] = []
    for item in items:
        if item.kind == "command":
            widgets.append(UserView(item.text))
            widgets += [NoticeView(level, text) for level, text in item.notices]
            name = item.text.removeprefix("/").split(maxsplit=1)[0].lower() if item.text else ""
            if command_notes is not None and name in command_notes:
                widgets.append(NoticeView("info", command_notes[name]))
        if item.kind == "user_text":
            is_steer = steering is not None and item.uuid in steering
            widgets.append(SteerView(item.text) if is_steer else UserView(item.text))
        elif item.kind == "assistant_text":
            widgets.append(AssistantView(item.text))
        elif item.kind == "thought":
            widgets.append(ThoughtView(item.text))
        elif item.kind == "recap":
            widgets.append(RecapView(item.text))
        elif item.kind == "tool_call":
            widgets.append(_replayed_tool(item, title_of, kind_of, base))
    return widgets


def _replayed_tool(
    item: ReplayItem, title_of: TitleOf | None, kind_of: KindOf | None, base: Path | None
) -> ToolCallView:
    name = item.tool_name or "tool"
    title = name
    if title_of is not None:
        try:
            title = title_of(name, item.args)
        except Exception:  # a title is cosmetic: an old recording must still replay
            title = name
    kind = kind_of(name) if kind_of is not None else None
    view = ToolCallView(item.tool_call_id or "", name, title, item.args, kind=kind, base=base)
    if item.subagent is not None:
        view.subagent = SubagentView.of(item.subagent)
    if item.status in ENDING_TEXT or (item.error is None and item.result is None):
        view.set_status("cancelled")
        view.show_ending(item.status or "cancelled")
    elif item.error is not None:
        view.set_status("failed")
        view.show_result(item.error, error=True)
    else:
        view.set_status("completed")
        view.show_result(item.result, display=item.display, diff=item.diff)
    return view
