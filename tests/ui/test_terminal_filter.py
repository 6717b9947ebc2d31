"""The terminal UI's last fence: no control character of drawn text reaches the terminal (#24)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.color import Color

from cairn.ui.terminal_filter import ControlCharacterFilter


def test_control_characters_and_bidi_overrides_are_dropped_from_every_drawn_line() -> None:
    bold = Style(bold=True)
    line = [
        Segment("safe "),
        Segment("a\x1b]52;c;cm0g\x07b\x9b31m\u202ec\x7f", bold),
        Segment("\x1b[2J", None, [(1,)]),  # type: ignore[list-item] # Textual's own control
    ]

    drawn = ControlCharacterFilter().apply(line, Color(0, 0, 0))

    assert [segment.text for segment in drawn] == ["safe ", "a]52;c;cm0gb31mc", "\x1b[2J"]
    assert drawn[0] is line[0] and drawn[1].style == bold

