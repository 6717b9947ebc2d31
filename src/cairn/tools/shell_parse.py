"""A small parser for the shell commands the model runs, and the read-only check built on it.

It understands the bash that matters for deciding safety: quoting (``'...'``, ``"..."``,
``$'...'``, backslashes), the list and pipeline operators (``|``, ``|&``, ``&&``, ``||``, ``;``,
``&``, newlines), redirections with file-descriptor prefixes (``2>&1``), here-documents,
comments, ``$(...)``/backtick/``<(...)`` substitutions (whose bodies are kept for parsing on
their own) and ``( ... )`` groups. Anything it cannot read is a :class:`ShellParseError`, and
:func:`is_read_only_command` answers ``False`` for it: unknown means "ask".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ParsedCommand",
    "Redirection",
    "ShellParseError",
    "SimpleCommand",
    "Word",
    "describe_command",
    "is_read_only_command",
    "parse_command",
    "split_commands",
]

MAX_SUBSTITUTION_DEPTH = 8  # nesting of $( ... ) followed by split_commands before giving up

# Longest first, so "&&" is not read as two "&".
_OPERATORS = (
    "<<<", "<<-", "&>>",
    "&&", "||", "|&", ";;", "<<", ">>", ">|", ">&", "<&", "<>", "&>",
    "|", "&", ";", "<", ">", "(", ")",
)  # fmt: skip
_OPERATOR_CHARS = frozenset("|&;<>()")
_REDIRECTIONS = frozenset({"<<<", "<<-", "&>>", "<<", ">>", ">|", ">&", "<&", "<>", "&>", "<", ">"})
_BINARY_OPERATORS = frozenset({"&&", "||", "|", "|&"})
_NAME_START = re.compile(r"[A-Za-z_0-9?#@*!$-]")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")


class ShellParseError(ValueError):
    """The command is not shell this parser can read (unbalanced quotes, a dangling ``&&`` ...)."""


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word: ``value`` after quote removal, ``raw`` as written."""

    value: str
    raw: str
    expands: bool = False  # holds a $-expansion or substitution outside single quotes
    glob: bool = False  # holds an unquoted *, ?, [ or { (pathname or brace expansion)

    @property
    def literal(self) -> bool:
        """True when bash passes ``value`` to the program exactly as parsed."""
        return not self.expands and not self.glob


@dataclass(frozen=True, slots=True)
class Redirection:
    fd: str  # the file-descriptor prefix ("2" in 2>&1), "" when absent
    op: str
    target: Word

    @property
    def text(self) -> str:
        return f"{self.fd}{self.op}{self.target.raw}"


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """A program with its arguments, leading ``NAME=value`` assignments and redirections."""

    assignments: tuple[Word, ...] = ()
    words: tuple[Word, ...] = ()
    redirections: tuple[Redirection, ...] = ()

    @property
    def program(self) -> str | None:
        return self.words[0].value if self.words else None

    @property
    def text(self) -> str:
        """The command as written, whitespace normalised (what permission rules match)."""
        parts = [w.raw for w in (*self.assignments, *self.words)]
        return " ".join([*parts, *(r.text for r in self.redirections)])

    @property
    def command_text(self) -> str:
        """The program and its arguments only, without assignments and redirections."""
        return " ".join(w.raw for w in self.words)


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    commands: tuple[SimpleCommand, ...]
    substitutions: tuple[str, ...] = ()  # bodies of $(...), `...`, <(...), >(...)
    subshell: bool = False  # a ( ... ) group
    heredoc: bool = False


@dataclass(frozen=True, slots=True)
class _Op:
    op: str
    fd: str = ""


@dataclass
class _PendingHeredoc:
    delimiter: str
    strip_tabs: bool
    quoted: bool


class _Lexer:
    """Turns a command string into words and operators, collecting substitution bodies."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.tokens: list[Word | _Op] = []
        self.substitutions: list[str] = []
        self.heredoc = False
        self._pending_heredocs: list[_PendingHeredoc] = []
        self._delimiter_op: str | None = None
        self._reset_word()

    def _reset_word(self) -> None:
        self._chars: list[str] = []
        self._start: int | None = None
        self._expands = False
        self._glob = False
        self._quoted = False

    def run(self) -> list[Word | _Op]:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t":
                self._flush()
                self.pos += 1
            elif char == "\n":
                self._flush()
                self.tokens.append(_Op("\n"))
                self.pos += 1
                self._read_heredoc_bodies()
            elif char == "#" and self._start is None:
                end = text.find("\n", self.pos)
                self.pos = len(text) if end == -1 else end
            elif char == "\\":
                self._backslash()
            elif char == "'":
                self._single_quoted()
            elif char == '"':
                self._begin(self.pos)
                self.pos = self._double_quoted(self.pos)
            elif char == "`":
                self._begin(self.pos)
                self.pos = self._backtick(self.pos)
            elif char == "$":
                self._begin(self.pos)
                self.pos = self._dollar(self.pos, quoted=False)
            elif char in "<>" and text.startswith("(", self.pos + 1):
                self._process_substitution()
            elif char in _OPERATOR_CHARS:
                self._operator()
            else:
                if char in "*?[{":
                    self._glob = True
                self._append(char)
                self.pos += 1
        self._flush()
        if self._delimiter_op is not None:
            raise ShellParseError(f"{self._delimiter_op} has no delimiter word")
        return self.tokens

    # words

    def _begin(self, at: int) -> None:
        if self._start is None:
            self._start = at

    def _append(self, chars: str) -> None:
        self._begin(self.pos)
        self._chars.append(chars)

    def _flush(self) -> None:
        if self._start is None:
            return
        word = Word(
            "".join(self._chars), self.text[self._start : self.pos], self._expands, self._glob
        )
        if self._delimiter_op is not None:
            self._pending_heredocs.append(
                _PendingHeredoc(word.value, self._delimiter_op == "<<-", self._quoted)
            )
            self._delimiter_op = None
        self.tokens.append(word)
        self._reset_word()

    def _backslash(self) -> None:
        following = self.text[self.pos + 1 : self.pos + 2]
        if following == "\n":  # line continuation
            self.pos += 2
            return
        self._begin(self.pos)
        self._quoted = True
        self._chars.append(following or "\\")
        self.pos += 2

    def _single_quoted(self) -> None:
        end = self.text.find("'", self.pos + 1)
        if end == -1:
            raise ShellParseError("unterminated single quote")
        self._begin(self.pos)
        self._quoted = True
        self._chars.append(self.text[self.pos + 1 : end])
        self.pos = end + 1

    def _double_quoted(self, start: int) -> int:
        """Read ``"..."`` from ``start``; returns the index after the closing quote."""
        self._quoted = True
        text, index = self.text, start + 1
        while index < len(text):
            char = text[index]
            if char == '"':
                return index + 1
            if char == "\\" and text[index + 1 : index + 2] in ("$", "`", '"', "\\", "\n"):
                if text[index + 1] != "\n":
                    self._chars.append(text[index + 1])
                index += 2
            elif char == "$":
                index = self._dollar(index, quoted=True)
            elif char == "`":
                index = self._backtick(index)
            else:
                self._chars.append(char)
                index += 1
        raise ShellParseError("unterminated double quote")

    def _dollar(self, start: int, *, quoted: bool) -> int:
        """Read an expansion starting with ``$``; returns the index after it."""
        text = self.text
        following = text[start + 1 : start + 2]
        if following == "(":
            end = _scan_parenthesised(text, start + 1)
            self.substitutions.append(text[start + 2 : end])
            return self._expansion(start, end + 1)
        if following == "{":
            end = _scan_braced(text, start + 1)
            self.substitutions.extend(_substitutions_in(text[start + 2 : end]))
            return self._expansion(start, end + 1)
        if following == "'" and not quoted:  # $'...' (ANSI-C escapes: value not literal)
            end = _scan_ansi_c(text, start + 2)
            self._quoted = True
            return self._expansion(start, end + 1)
        if following == '"' and not quoted:  # $"..." (locale translation)
            return self._double_quoted(start + 1)
        if following and _NAME_START.match(following):
            self._expands = True
        self._chars.append("$")
        return start + 1

    def _expansion(self, start: int, end: int) -> int:
        self._expands = True
        self._chars.append(self.text[start:end])
        return end

    def _backtick(self, start: int) -> int:
        end = _scan_backtick(self.text, start)
        self.substitutions.append(self.text[start + 1 : end].replace("\\`", "`"))
        return self._expansion(start, end + 1)

    def _process_substitution(self) -> None:
        self._begin(self.pos)
        end = _scan_parenthesised(self.text, self.pos + 1)
        self.substitutions.append(self.text[self.pos + 2 : end])
        self.pos = self._expansion(self.pos, end + 1)

    # operators and here-documents

    def _operator(self) -> None:
        op = next(o for o in _OPERATORS if self.text.startswith(o, self.pos))
        fd = ""
        is_fd_prefix = (
            op in _REDIRECTIONS
            and op[0] in "<>"
            and self._start is not None
            and not self._quoted
            and "".join(self._chars).isdigit()
        )
        if is_fd_prefix:
            fd = "".join(self._chars)
            self._reset_word()
        else:
            self._flush()
        if self._delimiter_op is not None:
            raise ShellParseError(f"{self._delimiter_op} has no delimiter word")
        self.tokens.append(_Op(op, fd))
        if op in ("<<", "<<-"):
            self.heredoc = True
            self._delimiter_op = op
        self.pos += len(op)

    def _read_heredoc_bodies(self) -> None:
        pending, self._pending_heredocs = self._pending_heredocs, []
        for doc in pending:
            body: list[str] = []
            while self.pos < len(self.text):
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end == -1 else end
                line = self.text[self.pos : end]
                self.pos = min(end + 1, len(self.text))
                if (line.lstrip("\t") if doc.strip_tabs else line) == doc.delimiter:
                    break
                body.append(line)
            if not doc.quoted:  # an unquoted delimiter expands $(...) in the body
                self.substitutions.extend(_substitutions_in("\n".join(body)))


def _scan_parenthesised(text: str, open_index: int) -> int:
    """The index of the ``)`` closing the ``(`` at ``open_index``."""
    depth, index = 0, open_index
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "'":
            end = text.find("'", index + 1)
            if end == -1:
                raise ShellParseError("unterminated single quote")
            index = end
        elif char == '"':
            index = _scan_double_quoted(text, index)
        elif char == "`":
            index = _scan_backtick(text, index)
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    raise ShellParseError("unbalanced parentheses")


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
            index = _scan_parenthesised(text, index + 1)
        elif char == "`":
            index = _scan_backtick(text, index)
        index += 1
    raise ShellParseError("unterminated double quote")


def _scan_backtick(text: str, start: int) -> int:
    index = start + 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == "`":
            return index
        index += 1
    raise ShellParseError("unterminated backquote")


def _scan_braced(text: str, open_index: int) -> int:
    depth, index = 0, open_index
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    raise ShellParseError("unterminated ${")


def _scan_ansi_c(text: str, start: int) -> int:
    index = start
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text[index] == "'":
            return index
        index += 1
    raise ShellParseError("unterminated $'...' quote")


def _substitutions_in(segment: str) -> list[str]:
    """``$(...)`` and backtick bodies inside text where quotes do not protect them."""
    found: list[str] = []
    index = 0
    while index < len(segment):
        if segment[index] == "\\":
            index += 2
            continue
        if segment.startswith("$(", index):
            end = _scan_parenthesised(segment, index + 1)
            found.append(segment[index + 2 : end])
            index = end
        elif segment[index] == "`":
            end = _scan_backtick(segment, index)
            found.append(segment[index + 1 : end])
            index = end
        index += 1
    return found


@dataclass
class _CommandBuilder:
    assignments: list[Word] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirections: list[Redirection] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.assignments or self.words or self.redirections)

    def add(self, word: Word) -> None:
        if not self.words and _ASSIGNMENT.match(word.raw):
            self.assignments.append(word)
        else:
            self.words.append(word)

    def build(self) -> SimpleCommand:
        return SimpleCommand(tuple(self.assignments), tuple(self.words), tuple(self.redirections))


def parse_command(command: str) -> ParsedCommand:
    """Split ``command`` into simple commands; raises :class:`ShellParseError`."""
    if not isinstance(command, str):
        raise ShellParseError("a command must be a string")
    lexer = _Lexer(command)
    tokens = lexer.run()
    commands: list[SimpleCommand] = []
    current = _CommandBuilder()
    subshell = False
    dangling: str | None = None  # a binary operator still waiting for its right-hand command

    def finish() -> None:
        nonlocal current
        if not current.empty:
            commands.append(current.build())
        current = _CommandBuilder()

    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if isinstance(token, Word):
            current.add(token)
            dangling = None
            continue
        op = token.op
        if op in _REDIRECTIONS:
            target = tokens[index] if index < len(tokens) else None
            if not isinstance(target, Word):
                raise ShellParseError(f"redirection {op} has no target")
            current.redirections.append(Redirection(token.fd, op, target))
            index += 1
            dangling = None
            continue
        if op in ("(", ")"):
            subshell = True
            dangling = None
        elif op in _BINARY_OPERATORS:
            if current.empty and not commands and not subshell:
                raise ShellParseError(f"{op} has no command before it")
            if dangling is not None:
                raise ShellParseError(f"{dangling} is followed by {op}")
            dangling = op
        elif op != "\n" and dangling is not None:
            raise ShellParseError(f"{dangling} is followed by {op}")
        finish()
    if dangling is not None:
        raise ShellParseError(f"the command ends with {dangling}")
    finish()
    return ParsedCommand(tuple(commands), tuple(lexer.substitutions), subshell, lexer.heredoc)


def split_commands(command: str) -> list[SimpleCommand] | None:
    """Every simple command in ``command``, including those inside substitutions.

    ``None`` when the command (or a substitution in it) cannot be parsed.
    """
    found: list[SimpleCommand] = []
    pending: list[tuple[str, int]] = [(command, 0)]
    while pending:
        text, depth = pending.pop()
        if depth > MAX_SUBSTITUTION_DEPTH:
            return None
        try:
            parsed = parse_command(text)
        except ShellParseError:
            return None
        found.extend(parsed.commands)
        pending.extend((body, depth + 1) for body in reversed(parsed.substitutions))
    return found


def describe_command(command: str) -> list[str]:
    """The programs ``command`` runs, in order (``[]`` when it cannot be parsed)."""
    commands = split_commands(command)
    if commands is None:
        return []
    return [c.program for c in commands if c.program is not None]


# The read-only check

# Programs that only read, as long as their arguments pass the checks below.
READ_ONLY_PROGRAMS = frozenset(
    {
        "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "find", "pwd",
        "echo", "printf", "stat", "file", "du", "df", "tree", "sort", "uniq", "cut", "tr",
        "which", "type", "date", "whoami", "uname", "basename", "dirname", "realpath",
        "readlink", "diff", "cmp", "md5sum", "sha256sum", "env", "git", "cd", "true", "false",
    }
)  # fmt: skip
# Variables that may prefix a read-only command: they change formatting, never what runs.
_SAFE_ASSIGNMENTS = frozenset({"LANG", "LANGUAGE", "TZ", "NO_COLOR", "TERM", "COLUMNS", "LINES"})
_NETWORK_DEVICES = ("/dev/tcp/", "/dev/udp/")  # bash opens sockets for these paths


def is_read_only_command(command: str) -> bool:
    """True only when every part of ``command`` is known to read without writing.

    Unparseable input, substitutions, subshells, here-documents, output redirections (other
    than to ``/dev/null`` or another descriptor) and any program outside the allowlist give
    ``False``.
    """
    try:
        parsed = parse_command(command)
    except ShellParseError:
        return False
    if parsed.substitutions or parsed.subshell or parsed.heredoc or not parsed.commands:
        return False
    return all(_simple_command_is_read_only(c) for c in parsed.commands)


def _simple_command_is_read_only(command: SimpleCommand) -> bool:
    if not command.words:
        return False
    if not all(_assignment_is_safe(a) for a in command.assignments):
        return False
    if not all(_redirection_is_safe(r) for r in command.redirections):
        return False
    program, *args = command.words
    if not program.literal or "/" in program.value or program.value not in READ_ONLY_PROGRAMS:
        return False
    check = _ARGUMENT_CHECKS.get(program.value)
    if check is None:
        return True
    # Options decide what these programs do, so every argument must be literal text.
    return all(a.literal for a in args) and check([a.value for a in args])


def _assignment_is_safe(assignment: Word) -> bool:
    name = re.split(r"[+=\[]", assignment.raw, maxsplit=1)[0]
    return name in _SAFE_ASSIGNMENTS or name.startswith("LC_")


def _redirection_is_safe(redirection: Redirection) -> bool:
    target = redirection.target
    if not target.literal or target.value.startswith(_NETWORK_DEVICES):
        return False
    if redirection.op in ("<", "<<<", "<&"):
        return True
    if redirection.op == ">&" and (target.value.isdigit() or target.value == "-"):
        return True
    return target.value == "/dev/null"


def _long_option_in(arg: str, options: Iterable[str]) -> bool:
    """True when ``arg`` names one of ``options``, abbreviations (as getopt allows) included."""
    if not arg.startswith("--") or len(arg) <= 2:
        return False
    name = arg.split("=", 1)[0]
    return any(option.startswith(name) for option in options)


def _short_flags(arg: str) -> str:
    """The letters of a short-option cluster (``-uo`` -> ``uo``), else ``""``."""
    if arg.startswith("-") and not arg.startswith("--"):
        return arg[1:]
    return ""


def _options_until_double_dash(args: Sequence[str]) -> list[str]:
    return list(args[: args.index("--")]) if "--" in args else list(args)


def _find_is_read_only(args: Sequence[str]) -> bool:
    actions = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls"}
    return not any(a in actions or a.startswith("-fprint") for a in args)


def _sort_is_read_only(args: Sequence[str]) -> bool:
    for arg in _options_until_double_dash(args):
        if _long_option_in(arg, ("--output", "--compress-program")) or "o" in _short_flags(arg):
            return False
    return True


def _uniq_is_read_only(args: Sequence[str]) -> bool:
    """uniq writes its second file argument."""
    options = _options_until_double_dash(args)
    operands = [a for a in options if a == "-" or not a.startswith("-")]
    operands += args[len(options) + 1 :]
    return len(operands) <= 1


def _tree_is_read_only(args: Sequence[str]) -> bool:
    """tree -o writes a file; -R writes one per folder."""
    return not any(set(_short_flags(a)) & {"o", "R"} for a in args)


def _file_is_read_only(args: Sequence[str]) -> bool:
    """file -C compiles a magic file."""
    return not any("C" in _short_flags(a) or _long_option_in(a, ("--compile",)) for a in args)


def _date_is_read_only(args: Sequence[str]) -> bool:
    """date -s and an MMDDhhmm operand set the clock; a +FORMAT operand only prints."""
    takes_value = {"-d", "-f", "-r", "--date", "--file", "--reference"}
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
            continue
        if arg in takes_value:
            skip_next = True
        elif (
            "s" in _short_flags(arg)
            or _long_option_in(arg, ("--set",))
            or not arg.startswith(("-", "+"))
        ):
            return False
    return True


def _rg_is_read_only(args: Sequence[str]) -> bool:
    """rg --pre runs a program on every file."""
    return not any(a.split("=", 1)[0] == "--pre" for a in args)


def _env_is_read_only(args: Sequence[str]) -> bool:
    """Plain ``env`` prints the environment; with operands it runs a command."""
    return all(a in ("-0", "--null") for a in args)


# git

_GIT_GLOBAL_FLAGS = frozenset(
    {"--no-pager", "-P", "--no-optional-locks", "--bare", "--no-replace-objects",
     "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs"}
)  # fmt: skip
_GIT_GLOBAL_OPTIONS_WITH_VALUE = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
_LISTING_VALUE_OPTIONS = frozenset(
    {"--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort",
     "--format", "--column"}
)  # fmt: skip


def _git_is_read_only(args: Sequence[str]) -> bool:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        arg = args[index]
        name = arg.split("=", 1)[0]
        if arg in _GIT_GLOBAL_FLAGS or (name in _GIT_GLOBAL_OPTIONS_WITH_VALUE and "=" in arg):
            index += 1
        elif arg in _GIT_GLOBAL_OPTIONS_WITH_VALUE:
            index += 2
        else:  # -c, --exec-path, --config-env ... can make git run other programs
            return False
    if index >= len(args):
        return False
    check = _GIT_SUBCOMMANDS.get(args[index])
    return check is not None and check(args[index + 1 :])


def _git_always(_args: Sequence[str]) -> bool:
    return True


def _git_history_is_read_only(args: Sequence[str]) -> bool:
    """log, show, diff: --output writes a file, --ext-diff runs a configured program."""
    options = _options_until_double_dash(args)
    return not any(_long_option_in(a, ("--output",)) or a == "--ext-diff" for a in options)


def _git_listing_is_read_only(
    args: Sequence[str], write_flags: frozenset[str], write_letters: str
) -> bool:
    """branch / tag: list only. Names are allowed as patterns after -l/--list, never else."""
    listing = "-l" in args or "--list" in args
    skip_next = False
    for arg in args:
        if skip_next:
            skip_next = False
        elif arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if name in write_flags:
                return False
            skip_next = name in _LISTING_VALUE_OPTIONS and "=" not in arg
        elif arg.startswith("-") and len(arg) > 1:
            if set(arg[1:]) & set(write_letters):
                return False
        elif not listing:
            return False
    return True


_BRANCH_WRITE_FLAGS = frozenset(
    {"--delete", "--move", "--copy", "--force", "--set-upstream-to", "--set-upstream",
     "--unset-upstream", "--edit-description", "--track", "--no-track", "--create-reflog",
     "--recurse-submodules"}
)  # fmt: skip
_TAG_WRITE_FLAGS = frozenset(
    {"--annotate", "--sign", "--local-user", "--force", "--delete", "--message", "--file",
     "--edit", "--create-reflog", "--trailer", "--cleanup", "--no-sign"}
)  # fmt: skip


def _git_branch_is_read_only(args: Sequence[str]) -> bool:
    return _git_listing_is_read_only(args, _BRANCH_WRITE_FLAGS, "dDmMcCfut")


def _git_tag_is_read_only(args: Sequence[str]) -> bool:
    return _git_listing_is_read_only(args, _TAG_WRITE_FLAGS, "asufdmFe")


def _git_remote_is_read_only(args: Sequence[str]) -> bool:
    if all(a in ("-v", "--verbose") for a in args):
        return True
    return args[0] in ("show", "get-url")


_CONFIG_READ_FLAGS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color",
     "--get-colorbool"}
)  # fmt: skip
_CONFIG_WRITE_FLAGS = frozenset(
    {"--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section",
     "--edit", "-e"}
)  # fmt: skip


def _git_config_is_read_only(args: Sequence[str]) -> bool:
    if any(a.split("=", 1)[0] in _CONFIG_WRITE_FLAGS for a in args):
        return False
    reads = any(a in _CONFIG_READ_FLAGS for a in args)
    return reads or (bool(args) and args[0] in ("get", "list"))


_GIT_SUBCOMMANDS: dict[str, Callable[[Sequence[str]], bool]] = {
    "status": _git_always,
    "rev-parse": _git_always,
    "ls-files": _git_always,
    "blame": _git_always,
    "describe": _git_always,
    "log": _git_history_is_read_only,
    "show": _git_history_is_read_only,
    "diff": _git_history_is_read_only,
    "branch": _git_branch_is_read_only,
    "tag": _git_tag_is_read_only,
    "remote": _git_remote_is_read_only,
    "config": _git_config_is_read_only,
}

# Programs whose options can make them write or run something, and the check for each.
_ARGUMENT_CHECKS: dict[str, Callable[[Sequence[str]], bool]] = {
    "find": _find_is_read_only,
    "sort": _sort_is_read_only,
    "uniq": _uniq_is_read_only,
    "tree": _tree_is_read_only,
    "file": _file_is_read_only,
    "date": _date_is_read_only,
    "rg": _rg_is_read_only,
    "env": _env_is_read_only,
    "git": _git_is_read_only,
}
