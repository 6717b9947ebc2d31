"""The status line under the prompt: model, approval mode, context used, memory on or off."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.text import Text
from textual.widgets import Static

__all__ = ["StatusLine", "StatusState", "format_tokens", "render_status"]

_MODE_STYLES = {"plan": "cyan", "default": "", "auto-edit": "yellow", "yolo": "bold red"}


@dataclass(frozen=True)
class StatusState:
    model: str = ""
    approval_mode: str = "default"
    context_tokens: int = 0
    context_window: int = 0
    memory: bool = True
    busy: bool = False
    hint: str = ""  # a short message on the right ("Press Ctrl+C again to quit")


def format_tokens(count: int) -> str:
    """1234 → ``1.2k``; 131072 → ``131k``."""
    if count >= 100_000:
        return f"{count // 1000}k"
    if count >= 1000:
        return f"{count / 1000:.1f}k"
    return str(count)


class StatusLine(Static):
    def __init__(self) -> None:
        super().__init__("", id="status")
        self.state = StatusState()

    def set(self, **changes: object) -> None:
        self.state = replace(self.state, **changes)  # type: ignore[arg-type]
        self.update(self.render_state())

    def render_state(self) -> Text:
        return render_status(self.state)


def render_status(state: StatusState) -> Text:
    text = Text()
    text.append(state.model or "no model", style="bold")
    text.append("  ·  ")
    text.append(state.approval_mode, style=_MODE_STYLES.get(state.approval_mode, ""))
    text.append("  ·  ")
    text.append(_context_text(state))
    text.append("  ·  ")
    memory = "on" if state.memory else "off"
    text.append(f"memory {memory}", style="" if state.memory else "dim")
    if state.busy:
        text.append("  ·  ")
        text.append("working…", style="yellow")
    if state.hint:
        text.append("  ·  ")
        text.append(state.hint, style="bold yellow")
    return text


def _context_text(state: StatusState) -> str:
    if not state.context_window:
        return "context 0%"
    share = 100 * state.context_tokens / state.context_window
    used, window = format_tokens(state.context_tokens), format_tokens(state.context_window)
    return f"context {share:.0f}% ({used}/{window})"
