"""Where the quoted and nested parts of a shell command line end, for the parser
(:mod:`cairn.tools.shell_parse`): quotes, backquotes, ``$( ... )``, ``${ ... }`` and
``$'...'`` (whose escapes are decoded as bash does), and the substitutions inside text that
quotes do not protect. Text it cannot close is a :class:`ShellParseError`."""

from __future__ import annotations

__all__ = [
    "ShellParseError",
    "decode_ansi_c",
    "scan_ansi_c",
    "scan_backtick",
    "scan_braced",
    "scan_parenthesised",
    "substitutions_in",
]

_ANSI_C_ESCAPES = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
    "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip


class ShellParseError(ValueError):
    """The command is not shell this parser can read (unbalanced quotes, a dangling ``&&`` ...)."""


def scan_parenthesised(text: str, open_index: int) -> int:
    """The index of the ``)`` closing the ``(`` at ``open_index``."""
    return _scan_nested(text, open_index, "()", "unbalanced parentheses", quoted=True)


def _scan_nested(text: str, index: int, pair: str, problem: str, *, quoted: bool) -> int:
    """The index of the ``pair[1]`` closing the ``pair[0]`` at ``index``; with ``quoted``,
    quotes and backquotes inside are skipped whole."""
    opener, closer = pair[0], pair[1]
    depth = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if quoted and char in "'\"`":
            index = _scan_quoted(text, index)
        elif char == opener:
            depth += 1
        elif char == closer:
            depth -= 1
            if depth == 0:
                return index
        index += 1
    raise ShellParseError(problem)


def _scan_quoted(text: str, start: int) -> int:
    """The index of the quote closing the ``'``, ``"`` or ``` ` ``` at ``start``."""
    if text[start] == "'":
        end = text.find("'", start + 1)
        if end == -1:
            raise ShellParseError("unterminated single quote")
        return end
    if text[start] == '"':
        return _scan_double_quoted(text, start)
    return scan_backtick(text, start)


def _scan_double_quoted(text: str, start: int) -> int:
    """The index of the ``"`` closing the one at ``start``."""
    index = start + 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == '"':
            return index
        if text.startswith("$(", index):
            index = scan_parenthesised(text, index + 1)
        elif char == "`":
            index = scan_backtick(text, index)
        index += 1
    raise ShellParseError("unterminated double quote")


def scan_backtick(text: str, start: int) -> int:
    """The index of the ``` ` ``` closing the one at ``start``."""
    return _scan_to(text, start + 1, "`", "unterminated backquote")


def _scan_to(text: str, index: int, closer: str, problem: str) -> int:
    """The index of the first unescaped ``closer`` from ``index`` on (backslash escapes)."""
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == closer:
            return index
        index += 1
    raise ShellParseError(problem)


def scan_braced(text: str, open_index: int) -> int:
    return _scan_nested(text, open_index, "{}", "unterminated ${", quoted=False)


def scan_ansi_c(text: str, start: int) -> int:
    return _scan_to(text, start, "'", "unterminated $'...' quote")


def decode_ansi_c(body: str) -> str:
    """The value of ``$'body'``: ``\\n``, ``\\xHH``, ``\\uHHHH``, octal and ``\\cX`` decoded."""
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\" or index + 1 >= len(body):
            out.append(char)
            index += 1
            continue
        code = body[index + 1]
        index += 2
        if code in _ANSI_C_ESCAPES:
            out.append(_ANSI_C_ESCAPES[code])
        elif code in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[code]
            digits = _leading(body, index, width, "0123456789abcdefABCDEF")
            out.append(_code_point(int(digits, 16)) if digits else "\\" + code)
            index += len(digits)
        elif code in "01234567":
            digits = code + _leading(body, index, 2, "01234567")
            out.append(chr(int(digits, 8) & 0xFF))
            index += len(digits) - 1
        elif code == "c" and index < len(body):
            out.append(chr(ord(body[index]) & 0x1F))
            index += 1
        else:
            out.append("\\" + code)
    return "".join(out)


def _leading(text: str, start: int, limit: int, allowed: str) -> str:
    end = start
    while end < len(text) and end - start < limit and text[end] in allowed:
        end += 1
    return text[start:end]


def _code_point(value: int) -> str:
    if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:  # not a character bash could print
        return "\ufffd"
    return chr(value)


def substitutions_in(segment: str) -> list[str]:
    """``$(...)`` and backtick bodies inside text where quotes do not protect them."""
    found: list[str] = []
    index = 0
    while index < len(segment):
        if segment[index] == "\\":
            index += 2
            continue
        if segment.startswith("$(", index):
            end = scan_parenthesised(segment, index + 1)
            found.append(segment[index + 2 : end])
            index = end
        elif segment[index] == "`":
            end = scan_backtick(segment, index)
            found.append(segment[index + 1 : end])
            index = end
        index += 1
    return found
