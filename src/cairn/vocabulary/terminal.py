"""Text that did not come from cairn itself, made safe to print on a terminal.

A model's answer, a tool's output, a hook command from a project file or an MCP server's name can
carry terminal control sequences (an OSC 52 clipboard write, a screen clear, a cursor move that
overwrites a line already shown) and Unicode bidirectional overrides that make a command read
differently from what runs (``U+202E`` shows ``rm -rf ~ #txt.sl`` as something harmless).
:func:`escape_for_terminal` shows every such character as a visible escape (``\\x1b``,
``\\u202e``) instead, one character at a time, so text escaped in chunks (a stream) is escaped
exactly as the whole would be.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["BIDI_CONTROLS", "escape_for_terminal"]

# Unicode's bidirectional formatting characters: the embeddings and overrides (U+202A..U+202E),
# the isolates (U+2066..U+2069) and the implicit marks (ALM, LRM, RLM).
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


@cache
def _unsafe(keep_newlines: bool) -> re.Pattern[str]:
    """C0 controls (but newline and tab when lines are kept), DEL, C1 controls, bidi controls, and
    a carriage return that does not end a line (one that does is a CRLF, harmless)."""
    c0 = "\x00-\x08\x0b\x0c\x0e-\x1f" if keep_newlines else "\x00-\x0c\x0e-\x1f"
    bidi = "".join(sorted(BIDI_CONTROLS))
    carriage_return = r"\r(?!\n)" if keep_newlines else r"\r"
    return re.compile(f"[{c0}\x7f-\x9f{bidi}]|{carriage_return}")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_for_terminal(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with every C0 and C1 control character, DEL and bidi control shown as a visible
    escape (``"\\x1b]52;c;..."`` prints as ``\\x1b]52;c;...``). Newlines, tabs and CRLF line ends
    are kept unless ``keep_newlines`` is false (a value shown on one line of a listing, where a
    newline could forge the next line). Text without such characters is returned as is."""
    pattern = _unsafe(keep_newlines)
    if pattern.search(text) is None:
        return text
    return pattern.sub(_visible, text)
