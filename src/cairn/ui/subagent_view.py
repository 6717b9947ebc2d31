"""A subagent's work under the ``agent`` call running it: its tool calls with their status and
its answers, in a block that opens and closes; built from live events or from a recording."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.widgets import Collapsible, Static

from cairn.vocabulary.events import AssistantMessage, SessionEvent, ToolCallStart, ToolCallUpdate
from cairn.vocabulary.terminal import escape_for_terminal as shown
from cairn.vocabulary.tool_calls import SubagentReport

__all__ = ["MAX_SUBAGENT_ANSWER_CHARS", "STATUS_MARKS", "SubagentView"]

MAX_SUBAGENT_ANSWER_CHARS = 400  # of each answer a subagent gave, shown under its call
STATUS_MARKS: Mapping[str, tuple[str, str]] = {
    "pending": ("○", "yellow"),
    "in_progress": ("◐", "yellow"),
    "completed": ("✓", "green"),
    "failed": ("✗", "red"),
    "cancelled": ("⊘", "bright_black"),
}


class SubagentView(Collapsible):
    """A subagent's steps and answers under the agent call running it; collapsed, the title
    says how far it got."""

    def __init__(self, agent_type: str) -> None:
        self.agent_type = agent_type
        self.steps: dict[str, list[str]] = {}  # call id -> [title, status]
        self.answers: list[str] = []
        self._lines = Static("", classes="subagent-steps")
        super().__init__(self._lines, title=self._heading(), collapsed=True, classes="subagent")

    @classmethod
    def of(cls, report: SubagentReport) -> SubagentView:
        """The view of a recorded subagent's work (a replay), as it was left live."""
        view = cls(report.agent_type)
        for number, (title, status) in enumerate(report.steps):
            view.steps[str(number)] = [shown(title, keep_newlines=False), status]
        view.answers = [_clipped_answer(answer) for answer in report.answers]
        view.title = view._heading()
        view._lines.update(view.text())
        return view

    def update_from(self, event: SessionEvent) -> None:
        if isinstance(event, ToolCallStart):
            title = shown(event.title or event.name, keep_newlines=False)
            self.steps[event.call_id] = [title, "pending"]
        elif isinstance(event, ToolCallUpdate) and event.call_id in self.steps:
            self.steps[event.call_id][1] = event.status
        elif isinstance(event, AssistantMessage) and event.text.strip():
            self.answers.append(_clipped_answer(event.text))
        else:
            return
        self.title = self._heading()
        self._lines.update(self.text())

    def text(self) -> Text:
        shown = Text()
        for title, status in self.steps.values():
            mark, style = STATUS_MARKS.get(status, ("•", ""))
            shown.append(f"{mark} ", style=style)
            shown.append(f"{title}\n")
        for answer in self.answers:
            shown.append(f"{answer}\n", style="italic")
        shown.rstrip()
        return shown

    def _heading(self) -> str:
        count = len(self.steps)
        latest = next(reversed(self.steps.values()), None)
        now = f" · {latest[0]}" if latest is not None else ""
        return f"{self.agent_type}: {count} tool call{'' if count == 1 else 's'}{now}"


def _clipped_answer(answer: str) -> str:
    text = shown(answer.strip())
    if len(text) > MAX_SUBAGENT_ANSWER_CHARS:
        text = text[: MAX_SUBAGENT_ANSWER_CHARS - 1] + "…"
    return text
