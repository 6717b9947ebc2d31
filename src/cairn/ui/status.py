"""The status line under the prompt: model, approval mode, context used, memory on or off.

While a turn runs it starts with a spinner and the time the turn has taken so far.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from rich.text import Text
from textual.timer import Timer
from textual.widgets import Static

__all__ = [
    "SPINNER_FRAMES",
    "StatusLine",
    "StatusState",
    "format_elapsed",
    "format_tokens",
    "render_status",
]

SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPINNER_INTERVAL_SECONDS = 0.1  # one spinner frame; the elapsed time is redrawn with it
_MODE_STYLES = {"plan": "cyan", "default": "", "auto-edit": "yellow", "yolo": "bold red"}


@dataclass(frozen=True)
class StatusState:
    model: str = ""
    approval_mode: str = "default"
    context_tokens: int = 0
    context_window: int = 0
    cached_tokens: int = 0  # of the last prompt, read from the endpoint's cache
    memory: bool = True
    busy: bool = False
    elapsed: float = 0.0  # seconds the running turn has taken (it also turns the spinner)
    hint: str = ""  # a short message on the right ("Press Ctrl+C again to quit")


def format_tokens(count: int) -> str:
    """1234 → ``1.2k``; 131072 → ``131k``."""
    if count >= 100_000:
        return f"{count // 1000}k"
    if count >= 1000:
        return f"{count / 1000:.1f}k"
    return str(count)


def format_elapsed(seconds: float) -> str:
    """7.9 → ``7s``; 65 → ``1m 05s``; 3725 → ``1h 02m``."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


class StatusLine(Static):
    """``clock`` times the running turn (tests move it instead of waiting)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__("", id="status")
        self.state = StatusState()
        self._clock = clock
        self._busy_since: float | None = None
        self._timer: Timer | None = None
        self._shown: StatusState | None = None  # the state on screen

    def set(self, **changes: object) -> None:
        busy = changes.get("busy")
        if busy is True and not self.state.busy:
            self._busy_since = self._clock()
            changes.update(elapsed=0.0)
            if self._timer is None:
                self._timer = self.set_interval(SPINNER_INTERVAL_SECONDS, self.tick)
        elif busy is False and self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.state = replace(self.state, **changes)  # type: ignore[arg-type]
        if self.state == self._shown:
            return  # the same line again (a tick of a stopped clock, a repeated update)
        self._shown = self.state
        # one line of the screen's width whatever it says: a repaint, never a layout of the
        # whole screen (ten a second while a turn runs)
        self.update(self.render_state(), layout=False)

    def tick(self) -> None:
        """Redraw the elapsed time and the spinner's frame for it."""
        if not self.state.busy or self._busy_since is None:
            return
        self.set(elapsed=self._clock() - self._busy_since)

    def render_state(self) -> Text:
        return render_status(self.state)


def render_status(state: StatusState) -> Text:
    """Most urgent first, so a narrow terminal clips the least useful part: what is running,
    a hint, then the model, the approval mode, the context used and memory."""
    text = Text()
    if state.busy:
        frame = int(state.elapsed / SPINNER_INTERVAL_SECONDS) % len(SPINNER_FRAMES)
        text.append(f"{SPINNER_FRAMES[frame]} ", style="yellow")
        text.append(f"working… {format_elapsed(state.elapsed)}", style="yellow")
        text.append(" · esc to interrupt", style="dim")
        text.append("  ·  ")
    if state.hint:
        text.append(state.hint, style="bold yellow")
        text.append("  ·  ")
    text.append(state.model or "no model", style="bold")
    text.append("  ·  ")
    text.append(state.approval_mode, style=_MODE_STYLES.get(state.approval_mode, ""))
    text.append("  ·  ")
    text.append(_context_text(state))
    text.append("  ·  ")
    memory = "on" if state.memory else "off"
    text.append(f"memory {memory}", style="" if state.memory else "dim")
    return text


def _context_text(state: StatusState) -> str:
    if not state.context_window:
        return "context 0%"
    share = 100 * state.context_tokens / state.context_window
    used, window = format_tokens(state.context_tokens), format_tokens(state.context_window)
    cached = f", {format_tokens(state.cached_tokens)} cached" if state.cached_tokens else ""
    return f"context {share:.0f}% ({used}/{window}{cached})"
