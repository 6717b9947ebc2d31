"""What a command line runs: each command's program, and the script an interpreter is given.

The trusted-folders check (:mod:`cairn.config.trust`) trusts a hook or an MCP server with the
content of the project files it runs; this finds them in the command line.
"""

from __future__ import annotations

import os
import re
import shlex

__all__ = ["programs"]

# Programs whose first argument is the script they run.
_INTERPRETERS = frozenset({"python", "bash", "sh", "zsh", "node", "deno", "bun", "ruby", "perl"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def programs(text: str) -> list[str]:
    """What a command line runs: each command's program, and the script an interpreter is
    given (``python hooks/check.py``); not its other arguments (data files change)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = text.split()
    programs: list[str] = []
    segment: list[str] = []
    redirect_target = False
    for token in [*tokens, ";"]:
        if token and all(c in "<>" for c in token):
            redirect_target = True  # "> file": the file is no program
        elif token and all(c in ";&|()" for c in token):
            programs += _segment_programs(segment)
            segment, redirect_target = [], False
        elif redirect_target:
            redirect_target = False
        else:
            segment.append(token)
    return programs


def _segment_programs(words: list[str]) -> list[str]:
    words = [w for w in words if not _ASSIGNMENT.match(w)]
    if not words:
        return []
    found = [words[0]]
    if os.path.basename(words[0]).rstrip("0123456789.") in _INTERPRETERS:
        script = next((w for w in words[1:] if not w.startswith("-")), None)
        if script is not None:
            found.append(script)
    return found
