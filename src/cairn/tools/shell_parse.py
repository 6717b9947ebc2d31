"""A small parser for the shell commands the model runs.

It understands the bash that matters for deciding safety: quoting (``'...'``, ``"..."``,
``$'...'`` with its escapes decoded, backslashes), the list and pipeline operators (``|``, ``|&``,
``&&``, ``||``, ``;``, ``&``, newlines), redirections with file-descriptor prefixes (``2>&1``),
here-documents, comments, ``$(...)``/backtick/``<(...)`` substitutions (whose bodies are kept for
parsing on their own), ``( ... )`` subshells, and the reserved words of compound commands
(``if``/``then``/``fi``, loops, ``case ... esac``, ``{ ...; }`` groups, function definitions), so
that every simple command inside them is found with its real program first. Anything it cannot
read is a :class:`ShellParseError`.

What a command line runs (wrappers, paths, ``bash -c``) is :mod:`cairn.tools.shell_resolve`;
which commands only read is :mod:`cairn.tools.shell_readonly`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cairn.tools.shell_scan import (
    ShellParseError,
    decode_ansi_c,
    scan_ansi_c,
    scan_backtick,
    scan_braced,
    scan_parenthesised,
    substitutions_in,
)

__all__ = [
    "MAX_SUBSTITUTION_DEPTH",
    "ParsedCommand",
    "Redirection",
    "ShellParseError",
    "SimpleCommand",
    "Word",
    "describe_command",
    "parse_command",
    "split_commands",
]

MAX_SUBSTITUTION_DEPTH = 8  # nesting of $( ... ) followed by split_commands before giving up

# Longest first, so "&&" is not read as two "&".
_OPERATORS = (
    "<<<", "<<-", "&>>", ";;&",
    "&&", "||", "|&", ";;", ";&", "<<", ">>", ">|", ">&", "<&", "<>", "&>",
    "|", "&", ";", "<", ">", "(", ")",
)  # fmt: skip
_OPERATOR_CHARS = frozenset("|&;<>()")
_REDIRECTIONS = frozenset({"<<<", "<<-", "&>>", "<<", ">>", ">|", ">&", "<&", "<>", "&>", "<", ">"})
_BINARY_OPERATORS = frozenset({"&&", "||", "|", "|&"})
_CASE_TERMINATORS = frozenset({";;", ";&", ";;&"})
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(?:,|\.\.)[^{}]*\}")  # {a,b} and {1..3}; {} is literal
_NAME_START = re.compile(r"[A-Za-z_0-9?#@*!$-]")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
# Reserved words that open or continue a compound command: the words after them are a command.
_RESERVED_LEADERS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{"})
_RESERVED_CLOSERS = frozenset({"fi", "done", "}", "esac"})
_MODIFIERS = frozenset({"time", "coproc"})  # run the command after them


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word: ``value`` after quote removal, ``raw`` as written."""

    value: str
    raw: str
    expands: bool = False  # holds a $-expansion or substitution outside single quotes
    glob: bool = False  # holds an unquoted *, ?, [ or { (pathname or brace expansion)
    tilde: bool = False  # starts with an unquoted ~ (bash puts a home folder there)

    @property
    def literal(self) -> bool:
        """True when bash passes ``value`` to the program exactly as parsed."""
        return not self.expands and not self.glob and not self.tilde

    @property
    def bare(self) -> bool:
        """Written without quotes, escapes or expansions (how reserved words must be written)."""
        return not self.expands and not self.tilde and self.raw == self.value


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
    compound: bool = False  # if/while/until/for/case, { ...; } groups, function definitions
    heredoc_bodies: tuple[str, ...] = ()  # the text of each here-document, in order


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
        self.heredoc_bodies: list[str] = []
        self._pending_heredocs: list[_PendingHeredoc] = []
        self._delimiter_op: str | None = None
        self._reset_word()

    def _reset_word(self) -> None:
        self._chars: list[str] = []
        self._start: int | None = None
        self._expands = False
        self._glob = False
        self._brace = False
        self._tilde = False
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
                if char in "*?[":
                    self._glob = True
                elif char == "{":
                    self._brace = True
                elif char == "~" and self._start is None:
                    self._tilde = True
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
        raw = self.text[self._start : self.pos]
        brace = self._brace and _BRACE_EXPANSION.search(raw) is not None
        word = Word("".join(self._chars), raw, self._expands, self._glob or brace, self._tilde)
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
            end = scan_parenthesised(text, start + 1)
            self.substitutions.append(text[start + 2 : end])
            return self._expansion(start, end + 1)
        if following == "{":
            end = scan_braced(text, start + 1)
            self.substitutions.extend(substitutions_in(text[start + 2 : end]))
            return self._expansion(start, end + 1)
        if following == "'" and not quoted:  # $'...': ANSI-C escapes, decoded as bash does
            end = scan_ansi_c(text, start + 2)
            self._quoted = True
            self._chars.append(decode_ansi_c(text[start + 2 : end]))
            return end + 1
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
        end = scan_backtick(self.text, start)
        self.substitutions.append(self.text[start + 1 : end].replace("\\`", "`"))
        return self._expansion(start, end + 1)

    def _process_substitution(self) -> None:
        self._begin(self.pos)
        end = scan_parenthesised(self.text, self.pos + 1)
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
            self.heredoc_bodies.append("\n".join(body))
            if not doc.quoted:  # an unquoted delimiter expands $(...) in the body
                self.substitutions.extend(substitutions_in("\n".join(body)))


@dataclass
class _CommandBuilder:
    assignments: list[Word] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirections: list[Redirection] = field(default_factory=list)
    header: bool = False  # the words of a for/select/case header: not a command
    drop_next: bool = False  # the word after `function` names the function

    @property
    def empty(self) -> bool:
        return not (self.assignments or self.words or self.redirections)

    @property
    def at_start(self) -> bool:
        """Where bash recognises reserved words: before any word or assignment."""
        return not self.words and not self.assignments and not self.header

    def add(self, word: Word) -> None:
        if self.drop_next:
            self.drop_next = False
        elif not self.words and _ASSIGNMENT.match(word.raw):
            self.assignments.append(word)
        else:
            self.words.append(word)

    def build(self) -> SimpleCommand:
        return SimpleCommand(tuple(self.assignments), tuple(self.words), tuple(self.redirections))


class _Parser:
    """Groups tokens into simple commands, seeing through the syntax of compound commands."""

    def __init__(self, tokens: list[Word | _Op]) -> None:
        self.tokens = tokens
        self.index = 0
        self.commands: list[SimpleCommand] = []
        self.current = _CommandBuilder()
        self.subshell = False
        self.compound = False
        self.dangling: str | None = None  # a binary operator waiting for its right-hand command
        self.cases: list[str] = []  # open `case` commands: "header", "pattern" or "body"

    def run(self) -> list[SimpleCommand]:
        while self.index < len(self.tokens):
            token = self.tokens[self.index]
            self.index += 1
            if isinstance(token, Word):
                self._word(token)
            else:
                self._operator(token)
        if self.dangling is not None:
            raise ShellParseError(f"the command ends with {self.dangling}")
        self._finish()
        return self.commands

    def _finish(self) -> None:
        current = self.current
        if current.header:
            # a header's redirections still apply (`for ...; done > f` is unusual, `case` too)
            current.words.clear()
            current.assignments.clear()
        if not current.empty:
            self.commands.append(current.build())
        self.current = _CommandBuilder()

    def _word(self, word: Word) -> None:
        self.dangling = None
        state = self.cases[-1] if self.cases else None
        if state == "header":
            if word.bare and word.value == "in":
                self.cases[-1] = "pattern"
            return
        if state == "pattern":
            if word.bare and word.value == "esac":
                self.cases.pop()
            return
        if self.current.at_start and word.bare and self._reserved(word.value):
            return
        self.current.add(word)

    def _reserved(self, value: str) -> bool:
        """Handle a reserved word at the start of a command; False when ``value`` is none."""
        if value in _RESERVED_LEADERS or value in _MODIFIERS:
            self.compound = True
            if value == "time" and self._next_word_is("-p"):
                self.index += 1
            return True
        if value in _RESERVED_CLOSERS:
            self.compound = True
            if value == "esac" and self.cases:
                self.cases.pop()
            return True
        if value in ("for", "select"):
            self.compound = True
            self.current.header = True
            return True
        if value == "case":
            self.compound = True
            self.cases.append("header")
            return True
        if value == "function":
            self.compound = True
            self.current.drop_next = True
            return True
        return False

    def _next_word_is(self, value: str) -> bool:
        following = self.tokens[self.index] if self.index < len(self.tokens) else None
        return isinstance(following, Word) and following.bare and following.value == value

    def _operator(self, token: _Op) -> None:
        op = token.op
        state = self.cases[-1] if self.cases else None
        if state in ("header", "pattern"):
            if state == "pattern" and op == ")":
                self.cases[-1] = "body"
            elif op not in ("(", "|", "\n", ";"):
                raise ShellParseError(f"unexpected {op} in a case pattern")
            return
        if op in _REDIRECTIONS:
            target = self.tokens[self.index] if self.index < len(self.tokens) else None
            if not isinstance(target, Word):
                raise ShellParseError(f"redirection {op} has no target")
            self.current.redirections.append(Redirection(token.fd, op, target))
            self.index += 1
            self.dangling = None
            return
        if op == "(" and self._function_definition():
            return
        if op in _CASE_TERMINATORS and state == "body":
            self._finish()
            self.cases[-1] = "pattern"
            return
        if op in ("(", ")"):
            self.subshell = True
            self.dangling = None
        elif op in _BINARY_OPERATORS:
            if self.current.empty and not self.commands and not self.subshell:
                raise ShellParseError(f"{op} has no command before it")
            if self.dangling is not None:
                raise ShellParseError(f"{self.dangling} is followed by {op}")
            self.dangling = op
        elif op != "\n" and self.dangling is not None:
            raise ShellParseError(f"{self.dangling} is followed by {op}")
        self._finish()

    def _function_definition(self) -> bool:
        """``name ()`` defines a function: the name is not a command, and ``()`` no subshell."""
        current = self.current
        following = self.tokens[self.index] if self.index < len(self.tokens) else None
        if len(current.words) != 1 or current.assignments or current.redirections:
            return False
        if not (isinstance(following, _Op) and following.op == ")"):
            return False
        self.index += 1
        self.compound = True
        self.current = _CommandBuilder()
        return True


def parse_command(command: str) -> ParsedCommand:
    """Split ``command`` into simple commands; raises :class:`ShellParseError`."""
    if not isinstance(command, str):
        raise ShellParseError("a command must be a string")
    lexer = _Lexer(command)
    parser = _Parser(lexer.run())
    commands = parser.run()
    return ParsedCommand(
        tuple(commands),
        tuple(lexer.substitutions),
        parser.subshell,
        lexer.heredoc,
        parser.compound,
        tuple(lexer.heredoc_bodies),
    )


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
