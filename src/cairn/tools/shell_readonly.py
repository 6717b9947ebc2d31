"""Which shell commands only read, so that they may run without asking.

A command line is read-only when every simple command in it is one of :data:`READ_ONLY_PROGRAMS`
with arguments that cannot make it write or run something, and when everything it reads lies in
the :class:`ShellScope`: the folders the agent may read (the workspace; the memory folders for
the memory agents), minus what ``Read(...)`` deny rules cover. So ``ls && git status`` runs
unasked, ``cat ~/.ssh/id_rsa``, ``cat ../other/secret`` or ``ls /`` asks, and so does a command
whose arguments are only known when it runs (``cat $FILE``, ``echo $API_KEY``).

Anything this module cannot read with certainty is not read-only: unparseable text,
substitutions, subshells and compound commands, here-documents, output redirections other than to
``/dev/null`` or another descriptor, symlink-following options, globs over more than
:data:`MAX_GLOB_MATCHES` files. Unknown means "ask". Git has its own rules in
:mod:`cairn.tools.shell_git`.
"""

from __future__ import annotations

import glob as _glob
import itertools
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cairn.tools._walk import expand_braces
from cairn.tools.shell_git import git_reads, repository_config_hazard
from cairn.tools.shell_parse import (
    Redirection,
    ShellParseError,
    SimpleCommand,
    Word,
    parse_command,
)

__all__ = [
    "MAX_GLOB_MATCHES",
    "PURE_PROGRAMS",
    "READ_ONLY_PROGRAMS",
    "ShellScope",
    "is_read_only_command",
    "read_only_refusal",
]

MAX_GLOB_MATCHES = 1000  # files one glob in a read-only command may expand to

# Programs that read nothing but their arguments (and standard input).
PURE_PROGRAMS = frozenset(
    {"echo", "printf", "pwd", "true", "false", "date", "whoami", "uname", "basename", "dirname",
     "which", "type", "tr", "seq"}
)  # fmt: skip
# Programs that only read, as long as their arguments pass the checks below.
READ_ONLY_PROGRAMS = PURE_PROGRAMS | frozenset(
    {"ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "find", "stat", "file",
     "du", "df", "tree", "sort", "uniq", "cut", "realpath", "readlink", "diff", "cmp", "md5sum",
     "sha1sum", "sha256sum", "sha512sum", "nl", "tac", "rev", "comm", "paste", "test", "[",
     "git", "cd"}
)  # fmt: skip
# Variables that may prefix a read-only command: they change formatting, never what runs.
_SAFE_ASSIGNMENTS = frozenset({"LANG", "LANGUAGE", "TZ", "NO_COLOR", "TERM", "COLUMNS", "LINES"})
_NETWORK_DEVICES = ("/dev/tcp/", "/dev/udp/")  # bash opens sockets for these paths
_ALWAYS_READABLE = ("/dev/null",)


@dataclass(frozen=True)
class ShellScope:
    """Where a command runs and what it may read without asking.

    ``readable`` are the folders (resolved) a read-only command may read; ``denied`` says
    whether a ``Read(...)`` deny rule covers an absolute path.
    """

    cwd: Path
    readable: tuple[Path, ...]
    denied: Callable[[Path], bool] | None = None
    # resolved folders, so a glob's thousand matches cost one lstat each, not a realpath each
    _folders: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        cwd: Path,
        readable: Iterable[Path] | None = None,
        denied: Callable[[Path], bool] | None = None,
    ) -> ShellScope:
        roots = tuple(Path(os.path.realpath(r)) for r in (readable or (cwd,)))
        return cls(Path(os.path.realpath(cwd)), roots, denied)

    def may_read(self, path: Path) -> bool:
        """True when ``path`` (absolute, symlinks resolved here) lies inside ``readable``."""
        real = self._real(os.path.normpath(path))
        if real in _ALWAYS_READABLE:
            return True
        inside = any(real == str(root) or real.startswith(f"{root}/") for root in self.readable)
        return inside and not (self.denied is not None and self.denied(Path(real)))

    def _real(self, path: str) -> str:
        folder, name = os.path.split(path)
        real_folder = self._folders.get(folder)
        if real_folder is None:
            real_folder = self._folders[folder] = os.path.realpath(folder)
        candidate = os.path.join(real_folder, name)
        if not name or os.path.islink(candidate):
            return os.path.realpath(candidate)
        return candidate


def is_read_only_command(command: str, scope: ShellScope | None = None) -> bool:
    """True only when every part of ``command`` is known to read without writing, and only
    inside ``scope`` (default: the current directory)."""
    return read_only_refusal(command, scope) is None


def read_only_refusal(command: str, scope: ShellScope | None = None) -> str | None:
    """Why ``command`` is not read-only, or ``None`` when it is."""
    if not isinstance(command, str):
        return "the command is not text"
    if "\x00" in command:
        return "it holds a NUL byte, which no program can be given"
    try:
        parsed = parse_command(command)
    except ShellParseError as exc:
        return f"it cannot be parsed ({exc})"
    if not parsed.commands:
        return "it runs nothing"
    if parsed.substitutions:
        return "it holds command substitutions"
    if parsed.subshell or parsed.compound:
        return "it holds subshells or compound commands"
    if parsed.heredoc:
        return "it holds a here-document"
    checker = _Checker(scope or ShellScope.of(Path.cwd()))
    for simple in parsed.commands:
        refusal = checker.simple(simple)
        if refusal is not None:
            return refusal
    return None


class _Checker:
    """Checks simple commands in order; ``cd`` adds the folders later commands may run in."""

    def __init__(self, scope: ShellScope) -> None:
        self.scope = scope
        self.cwds: list[Path] = [scope.cwd]

    def simple(self, command: SimpleCommand) -> str | None:
        if not command.words:
            return "it only assigns variables or redirects"
        for assignment in command.assignments:
            if not _assignment_is_safe(assignment):
                return f"it sets {assignment.raw.split('=', 1)[0]}"
        for redirection in command.redirections:
            refusal = self.redirection(redirection)
            if refusal is not None:
                return refusal
        program, *args = command.words
        name = program.value
        if not program.literal or "/" in name or name not in READ_ONLY_PROGRAMS:
            return f"{program.raw} is not a read-only program"
        if any(a.expands or a.tilde for a in args):
            return f"the arguments of {name} are only known when it runs"
        refusal = self.globs(args)
        if refusal is not None:
            return refusal
        values = [a.value for a in args]
        if name == "cd":
            return self.cd(values)
        if name == "git":
            return self.git(values)
        check = _ARGUMENT_CHECKS.get(name)
        if check is not None and not check(values):
            return f"these options of {name} may write or run something"
        if name in PURE_PROGRAMS:
            return None
        return self.paths(_path_candidates(values), implicit_cwd=True)

    def redirection(self, redirection: Redirection) -> str | None:
        target = redirection.target
        if not target.literal or target.value.startswith(_NETWORK_DEVICES):
            return f"it redirects to {target.raw}"
        if redirection.op in ("<", "<&"):
            if redirection.op == "<&" and (target.value.isdigit() or target.value == "-"):
                return None
            return self.paths([target.value], implicit_cwd=False)
        if redirection.op == "<<<":
            return None
        if redirection.op == ">&" and (target.value.isdigit() or target.value == "-"):
            return None
        if target.value in _ALWAYS_READABLE:
            return None
        return f"it writes to {target.raw}"

    def globs(self, args: Sequence[Word]) -> str | None:
        """Each glob is expanded here, so the files it names can be checked like operands."""
        for word in args:
            if not word.glob:
                continue
            patterns = expand_braces(word.value)
            if any(_dot_glob(p) for p in patterns):
                return f"{word.raw} may match .. and leave the folder"
            for cwd in self.cwds:
                matches = list(
                    itertools.islice(
                        (m for p in patterns for m in _glob.iglob(p, root_dir=cwd)),
                        MAX_GLOB_MATCHES + 1,
                    )
                )
                if len(matches) > MAX_GLOB_MATCHES:
                    return f"{word.raw} matches more than {MAX_GLOB_MATCHES} files"
                option = next((m for m in matches if m.startswith("-")), None)
                if option is not None:  # `sort *` with a file named --output=x would write
                    return f"{word.raw} matches {option!r}, which the program reads as an option"
                refusal = self.paths([*matches, *patterns], implicit_cwd=False)
                if refusal is not None:
                    return refusal
        return None

    def paths(self, candidates: Iterable[str], *, implicit_cwd: bool) -> str | None:
        """Every candidate, read from every folder the command may run in, must be readable;
        with ``implicit_cwd`` and no candidate, the program reads the folder it runs in."""
        items = list(candidates)
        for cwd in self.cwds:
            if implicit_cwd and not items and not self.scope.may_read(cwd):
                return f"it reads {cwd}, outside the folders it may read"
            for item in items:
                if item == "-":
                    continue
                target = cwd / item if not os.path.isabs(item) else Path(item)
                if not self.scope.may_read(target):
                    return f"it reads {item}, outside the folders it may read"
        return None

    def cd(self, args: Sequence[str]) -> str | None:
        operands = [a for a in args if a not in ("-L", "-P", "-e", "-@")]
        if len(operands) != 1 or operands[0] == "-" or operands[0].startswith("-"):
            return "cd without one folder goes to a folder that is not known here"
        refusal = self.paths(operands, implicit_cwd=False)
        if refusal is not None:
            return refusal
        # cd may fail, so later commands may run in either folder
        self.cwds += [Path(os.path.realpath(cwd / operands[0])) for cwd in self.cwds]
        return None

    def git(self, args: Sequence[str]) -> str | None:
        read = git_reads(args)
        if read is None:
            return "this git command is not known to only read"
        for cwd in self.cwds:
            directory = cwd
            for step in read.directories:
                directory = directory / step
                if not self.scope.may_read(directory):
                    return f"git -C {step} runs outside the folders it may read"
            if not self.scope.may_read(directory):
                return f"git reads {directory}, outside the folders it may read"
            for item in read.paths:
                target = Path(item) if os.path.isabs(item) else directory / item
                if not self.scope.may_read(target):
                    return f"git reads {item}, outside the folders it may read"
            hazard = repository_config_hazard(directory)
            if hazard is not None:
                return f"the repository's git config may run programs: {hazard}"
        return None


def _path_candidates(args: Sequence[str]) -> list[str]:
    """What in ``args`` may name a file: operands, ``--opt=VALUE`` values, attached ``-xVALUE``."""
    found: list[str] = []
    after_double_dash = False
    for arg in args:
        if after_double_dash or not arg.startswith("-") or arg == "-":
            found.append(arg)
        elif arg == "--":
            after_double_dash = True
        elif arg.startswith("--"):
            if "=" in arg:
                found.append(arg.split("=", 1)[1])
        elif len(arg) > 2:
            found.append(arg[2:])
    return [f for f in found if f]


def _dot_glob(pattern: str) -> bool:
    """A segment such as ``.*`` can match ``..`` in bash."""
    return any(
        segment.startswith(".") and any(c in segment for c in "*?[")
        for segment in pattern.split("/")
    )


def _assignment_is_safe(assignment: Word) -> bool:
    name = re.split(r"[+=\[]", assignment.raw, maxsplit=1)[0]
    return assignment.literal and (name in _SAFE_ASSIGNMENTS or name.startswith("LC_"))


# ----- options that make a read-only program write or run something -----


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


def _options(args: Sequence[str]) -> list[str]:
    return list(args[: args.index("--")]) if "--" in args else list(args)


def _refuses(
    long_options: Iterable[str] = (), letters: str = ""
) -> Callable[[Sequence[str]], bool]:
    """A check refusing these long options (abbreviations included) and short letters."""
    long_options = tuple(long_options)

    def check(args: Sequence[str]) -> bool:
        return not any(
            _long_option_in(a, long_options) or set(_short_flags(a)) & set(letters)
            for a in _options(args)
        )

    return check


def _find_is_read_only(args: Sequence[str]) -> bool:
    """find runs or writes through actions; -L and -follow follow symlinks out of the folder."""
    actions = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-L", "-H", "-follow"}
    return not any(a in actions or a.startswith("-fprint") for a in args)


def _uniq_is_read_only(args: Sequence[str]) -> bool:
    """uniq writes its second file argument."""
    options = _options(args)
    operands = [a for a in options if a == "-" or not a.startswith("-")]
    operands += args[len(options) + 1 :]
    return len(operands) <= 1


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
    """rg --pre and --hostname-bin run programs; -L follows symlinks out of the folder.

    ripgrep takes long options only as written (no abbreviations)."""
    runs = ("--pre", "--hostname-bin", "--follow", "-L")
    return not any(a.split("=", 1)[0] in runs or "L" in _short_flags(a) for a in _options(args))


def _ls_is_read_only(args: Sequence[str]) -> bool:
    """ls -R with -L walks through symlinked folders, out of the workspace."""
    options = _options(args)
    recursive = any("R" in _short_flags(a) or _long_option_in(a, ("--recursive",)) for a in options)
    follows = any(
        "L" in _short_flags(a) or _long_option_in(a, ("--dereference",)) for a in options
    )
    return not (recursive and follows)


_ARGUMENT_CHECKS: dict[str, Callable[[Sequence[str]], bool]] = {
    "find": _find_is_read_only,
    "sort": _refuses(("--output", "--compress-program"), "o"),
    "uniq": _uniq_is_read_only,
    "tree": _refuses((), "oRl"),
    "file": _refuses(("--compile",), "C"),
    "date": _date_is_read_only,
    "rg": _rg_is_read_only,
    "grep": _refuses(("--dereference-recursive",), "R"),
    "egrep": _refuses(("--dereference-recursive",), "R"),
    "fgrep": _refuses(("--dereference-recursive",), "R"),
    "du": _refuses(("--dereference",), "L"),
    "diff": _refuses(("--recursive",), "r"),
    "ls": _ls_is_read_only,
}
