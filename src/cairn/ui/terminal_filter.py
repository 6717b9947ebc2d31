"""The last fence between text cairn did not write and the terminal the UI draws on.

The transcript shows a model's, a tool's or a file's control characters as visible escapes
(:func:`~cairn.vocabulary.terminal.escape_for_terminal`); whatever text reaches the screen some
other way (a dialog, a list, a status line) passes this line filter, which drops C0 and C1
controls, DEL and bidi controls from every drawn line. They take no cells, so the layout is
unchanged, and the terminal never receives an OSC 52 clipboard write, a screen clear or a
right-to-left override from text.
"""

from __future__ import annotations

import re

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from cairn.vocabulary.terminal import BIDI_CONTROLS

__all__ = ["ControlCharacterFilter"]

_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{''.join(sorted(BIDI_CONTROLS))}]")


class ControlCharacterFilter(LineFilter):
    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [
            Segment(_UNSAFE.sub("", part.text), part.style, part.control)
            if not part.control and _UNSAFE.search(part.text)
            else part
            for part in segments
        ]
