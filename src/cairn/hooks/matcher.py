"""Which PreToolUse hooks apply to a tool: the ``matcher`` of a hook group.

``""``, ``"*"`` and ``".*"`` match every tool. A matcher equal to the tool name matches it, and
so does a ``|``-separated list with the tool name as one entry (``"edit|write_file"``).
Otherwise the matcher is a regular expression searched in the tool name (unanchored, as in the
reference: ``"read"`` matches ``read_file``; write ``"^read$"`` for an exact match). A matcher
that is not a valid expression matches nothing; :attr:`ToolMatcher.error` says why.

Claude Code's tool names are aliases (``"Bash"`` matches ``run_shell_command``, ``"Edit|Write"``
both writing tools; :mod:`cairn.vocabulary.tool_names`), matched as Claude Code matches them:
exactly, or by a regular expression matching the whole name, so ``"Write"`` is not
``TodoWrite``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cairn.vocabulary.tool_names import aliases_of

__all__ = ["ToolMatcher"]

_MATCH_ALL = {"", "*", ".*"}
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class ToolMatcher:
    pattern: str
    regex: re.Pattern[str] | None
    error: str | None = None

    @classmethod
    def compile(cls, matcher: str) -> ToolMatcher:
        pattern = matcher.strip()
        if pattern in _MATCH_ALL:
            return cls(pattern, None)
        try:
            return cls(pattern, re.compile(pattern))
        except re.error as exc:
            return cls(pattern, None, error=f"invalid matcher regex {pattern!r}: {exc}")

    def matches(self, tool_name: str) -> bool:
        if self.error is not None:
            return False
        if self.pattern in _MATCH_ALL:
            return True
        aliases = aliases_of(tool_name)
        entries = self._entries()
        if any(name == self.pattern or name in entries for name in (tool_name, *aliases)):
            return True
        if self.regex is None:
            return False
        return self.regex.search(tool_name) is not None or any(
            self.regex.fullmatch(alias) is not None for alias in aliases
        )

    def _entries(self) -> list[str]:
        if "|" not in self.pattern or self.pattern.startswith(("^", "(")):
            return []
        return [entry.strip() for entry in _UNESCAPED_PIPE.split(self.pattern)]
