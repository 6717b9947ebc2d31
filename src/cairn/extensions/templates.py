"""Turning a command or skill file's body into a prompt: arguments, shell steps, file mentions.

Three dialects, one per file format, so a file copied from another tool means what it meant
there:

- ``command`` (Claude Code's ``.claude/commands/*.md``, and cairn's own command files):
  ``$ARGUMENTS`` (everything typed after the command), ``$1`` … ``$9`` (the arguments one by one,
  split as a shell would: ``"two words"`` is one), ``$ARGUMENTS[0]`` … (the same, counted from
  0), and Qwen Code's ``{{args}}``. `` !`cmd` `` (at the start of a line or after a space) and a
  fenced block opened with ```` ```! ```` are shell steps: run first (after approval), their
  output takes their place. ``@path`` mentions attach files as in a prompt.
- ``skill`` (``SKILL.md``): as ``command``, but ``$0`` is the first argument, as Claude Code's
  skills count, and the names a skill declares in ``arguments`` stand for theirs (``$file``).
- ``qwen`` (Qwen Code's ``.toml`` files and ``.qwen/commands``): ``{{args}}`` only,
  ``!{cmd}`` shell steps (``{{args}}`` inside is shell-quoted) and ``@{path}`` file mentions.

Inside a shell step every argument is shell-quoted, so arguments are data, never code. A
backslash before a placeholder (``\\$1``) keeps it as written. ``${CLAUDE_PROJECT_DIR}``,
``${CAIRN_PROJECT_DIR}``, ``${CLAUDE_SESSION_ID}`` and, in a skill, ``${CLAUDE_SKILL_DIR}`` are
replaced everywhere. Arguments given to a body that uses none of the placeholders are added at
its end (``ARGUMENTS: …``; Qwen Code's files get the command line as typed).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

__all__ = ["Dialect", "Expansion", "ShellStep", "expand_template", "split_arguments"]

Dialect: TypeAlias = Literal["command", "skill", "qwen"]


@dataclass(frozen=True, slots=True)
class ShellStep:
    """A command to run before the prompt is sent; its output replaces it."""

    command: str


Piece: TypeAlias = str | ShellStep


@dataclass
class Expansion:
    """A body with its arguments put in: text and shell steps, in order."""

    pieces: list[Piece] = field(default_factory=list)

    @property
    def steps(self) -> list[ShellStep]:
        return [p for p in self.pieces if isinstance(p, ShellStep)]

    def text(self, outputs: Sequence[str] = ()) -> str:
        """The prompt, each shell step replaced by its output (in order)."""
        results = iter(outputs)
        return "".join(p if isinstance(p, str) else next(results, "") for p in self.pieces)


_INLINE_SHELL = re.compile(r"(?:(?<=\s)|^)!`([^`\n]+)`", re.MULTILINE)
_FENCED_SHELL = re.compile(r"^```![ \t]*\n(.*?)\n?^```[ \t]*$", re.MULTILINE | re.DOTALL)
_QWEN_ARGS = "{{args}}"
_VARIABLES = ("CLAUDE_PROJECT_DIR", "CAIRN_PROJECT_DIR", "CLAUDE_SESSION_ID", "CLAUDE_SKILL_DIR")
_VARIABLE = re.compile(r"\$\{(" + "|".join(_VARIABLES) + r")\}")


def split_arguments(args: str) -> list[str]:
    """The arguments of ``args`` as a shell would split them (plain spaces when the quoting
    is unbalanced)."""
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def expand_template(
    body: str,
    args: str,
    *,
    dialect: Dialect,
    variables: Mapping[str, str] | None = None,
    argument_names: Sequence[str] = (),
    invocation: str = "",
) -> Expansion:
    """``body`` with ``args`` put in (see the module's docstring). ``variables`` are the
    ``${…}`` values (missing ones stay as written); ``invocation`` is the command line as
    typed, which a Qwen Code file without ``{{args}}`` gets at its end."""
    values = dict(variables or {})
    if dialect == "qwen":
        return _expand_qwen(body, args, values, invocation)
    substitute = _Substitution(args, dialect, argument_names)
    pieces: list[Piece] = []
    position = 0
    for start, end, command in _shell_spans(body):
        pieces.append(substitute.text(_variables(body[position:start], values)))
        step = substitute.shell(_variables(command, values))
        if step.strip():
            pieces.append(ShellStep(step))
        position = end
    pieces.append(substitute.text(_variables(body[position:], values)))
    if args.strip() and not substitute.used:
        pieces.append(f"\n\nARGUMENTS: {args.strip()}")
    return Expansion([p for p in pieces if p != ""])


def _shell_spans(body: str) -> list[tuple[int, int, str]]:
    spans = [(m.start(), m.end(), m.group(1)) for m in _FENCED_SHELL.finditer(body)]
    for match in _INLINE_SHELL.finditer(body):
        if not any(start <= match.start() < end for start, end, _ in spans):
            spans.append((match.start(), match.end(), match.group(1)))
    return sorted(spans)


def _variables(text: str, values: Mapping[str, str]) -> str:
    return _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), text)


class _Substitution:
    """The argument placeholders of the ``command`` and ``skill`` dialects."""

    def __init__(self, args: str, dialect: Dialect, names: Sequence[str]) -> None:
        self.args = args.strip()
        self.words = split_arguments(self.args)
        self.zero_based = dialect == "skill"
        self.names = [n for n in names if re.fullmatch(r"[A-Za-z_]\w*", n)]
        self.used = False
        alternatives = [r"ARGUMENTS\[(?P<index>\d+)\]", r"ARGUMENTS(?!\w)"]
        alternatives.append(r"(?P<number>\d+)" if self.zero_based else r"(?P<number>[1-9])")
        # Longest names first, so $file_name is not read as $file followed by _name.
        alternatives += [
            rf"(?P<name_{i}>{re.escape(n)})(?!\w)"
            for i, n in sorted(enumerate(self.names), key=lambda x: -len(x[1]))
        ]
        self.pattern = re.compile(
            r"(?P<escape>\\?)(?:\$(?:" + "|".join(alternatives) + r")|(?P<qwen>\{\{args\}\}))"
        )

    def text(self, text: str) -> str:
        return self._replace(text, lambda value: value)

    def shell(self, command: str) -> str:
        return self._replace(command, shlex.quote)

    def _replace(self, text: str, quote: Callable[[str], str]) -> str:
        def replace(match: re.Match[str]) -> str:
            whole = match.group(0)
            if match.group("escape"):
                return whole[1:]  # \$1 is kept as $1
            self.used = True
            return quote(self._value(match))

        return self.pattern.sub(replace, text)

    def _value(self, match: re.Match[str]) -> str:
        if match.group("index") is not None:
            return self._word(int(match.group("index")))
        if match.group("number") is not None:
            number = int(match.group("number"))
            return self._word(number if self.zero_based else number - 1)
        for i in range(len(self.names)):
            if match.group(f"name_{i}") is not None:
                return self._word(i)
        return self.args  # $ARGUMENTS or {{args}}

    def _word(self, index: int) -> str:
        return self.words[index] if 0 <= index < len(self.words) else ""


def _expand_qwen(body: str, args: str, values: Mapping[str, str], invocation: str) -> Expansion:
    raw = args.strip()
    pieces: list[Piece] = []
    position = 0
    for start, end, command in _braced(body, "!{"):
        pieces.append(_qwen_text(body[position:start], raw, values))
        step = _variables(command, values).replace(_QWEN_ARGS, shlex.quote(raw))
        if step.strip():
            pieces.append(ShellStep(step))
        position = end
    pieces.append(_qwen_text(body[position:], raw, values))
    if raw and _QWEN_ARGS not in body:
        pieces.append(f"\n\n{invocation.strip() or raw}")
    return Expansion([p for p in pieces if p != ""])


def _qwen_text(text: str, raw: str, values: Mapping[str, str]) -> str:
    text = _variables(text, values).replace(_QWEN_ARGS, raw)
    parts: list[str] = []
    position = 0
    for start, end, path in _braced(text, "@{"):
        parts.append(text[position:start])
        mention = path.strip().replace(" ", "\\ ")
        parts.append(f" @{mention} " if mention else "")
        position = end
    parts.append(text[position:])
    return "".join(parts)


def _braced(text: str, opener: str) -> list[tuple[int, int, str]]:
    """``opener…}`` spans with balanced braces inside; an unclosed one is plain text."""
    spans: list[tuple[int, int, str]] = []
    position = 0
    while (start := text.find(opener, position)) != -1:
        depth = 1
        index = start + len(opener)
        while index < len(text) and depth:
            if text[index] == "{":
                depth += 1
            elif text[index] == "}":
                depth -= 1
            index += 1
        if depth:
            break
        spans.append((start, index, text[start + len(opener) : index - 1]))
        position = index
    return spans
