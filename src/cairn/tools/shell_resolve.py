"""What a shell command line really runs: every program, seen through wrappers and spellings.

``/bin/rm``, ``\\rm``, ``"rm"``, ``$'\\x72m'``, ``env rm``, ``command rm``, ``sudo rm``,
``nice -n 5 rm``, ``timeout 5 rm``, ``xargs rm``, ``find . -exec rm {} \\;``, ``bash -c "rm ..."``,
``eval "rm ..."``, ``bash <<EOF`` with a script, ``if ...; then rm; fi`` and ``{ rm; }`` all run
``rm``: :func:`resolve` lists an :class:`Invocation` for each program a command line runs,
including those hidden in substitutions and in the command strings of shells. Some commands stand
for another (``unlink x`` and ``find -delete`` delete like ``rm``): they are listed as ``rm`` too,
marked ``implied``.

What cannot be known before the command runs is listed in :attr:`CommandLine.unresolved`: a
program name built from a variable (``R=rm; $R x``) or a substitution, ``eval`` of one, a shell
reading its commands from a pipe, ``hash -p``, aliases switched on, text that does not parse.
Permission rules treat such a command line as needing approval. Programs that run other
programs in their own language (``python -c``, ``awk 'system(...)'``, ``make``, a script file) are
opaque here: a deny rule names programs, it cannot see inside them.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cairn.tools.shell_parse import (
    ShellParseError,
    SimpleCommand,
    Word,
    parse_command,
)

__all__ = ["MAX_RESOLVE_DEPTH", "CommandLine", "Invocation", "resolve"]

MAX_RESOLVE_DEPTH = 8  # nesting of substitutions, bash -c strings and wrappers followed
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "lksh", "rbash"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# Run-a-program subcommands of tool launchers: `uv run rm x` runs rm.
_LAUNCHERS = {
    "uv": "run", "poetry": "run", "pipenv": "run", "pdm": "run", "conda": "run",
    "pixi": "run", "hatch": "run", "bundle": "exec", "pnpm": "exec", "npm": "exec",
    "yarn": "exec", "mise": "exec", "rtx": "exec", "asdf": "exec",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Invocation:
    """One program a command line runs: its name as found on ``PATH`` and its arguments."""

    program: str  # the file name only, quotes removed: "rm" for "/bin/rm" or "\\rm"
    args: tuple[str, ...] = ()
    wrappers: tuple[str, ...] = ()  # what it runs under, outermost first: ("sudo", "env")
    implied: bool = False  # not written as such: what another command stands for

    @property
    def text(self) -> str:
        """``program arg ...`` (what permission rules match)."""
        return " ".join((self.program, *self.args))


@dataclass(frozen=True, slots=True)
class CommandLine:
    """Everything one command line runs, and what could not be known before it runs."""

    invocations: tuple[Invocation, ...]
    unresolved: tuple[str, ...]
    commands: tuple[SimpleCommand, ...]  # the simple commands as written, substitutions included

    @property
    def programs(self) -> list[str]:
        """The programs run, in order, each once."""
        return list(dict.fromkeys(i.program for i in self.invocations))


@dataclass
class _Resolver:
    invocations: list[Invocation] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    commands: list[SimpleCommand] = field(default_factory=list)

    def fail(self, reason: str) -> None:
        if reason not in self.unresolved:
            self.unresolved.append(reason)

    def line(self, text: str, depth: int, wrappers: tuple[str, ...]) -> None:
        if depth > MAX_RESOLVE_DEPTH:
            self.fail("commands are nested too deeply to follow")
            return
        try:
            parsed = parse_command(text)
        except ShellParseError as exc:
            self.fail(f"the command cannot be parsed ({exc})")
            return
        for body in parsed.substitutions:
            self.line(body, depth + 1, wrappers)
        bodies = iter(parsed.heredoc_bodies)
        for command in parsed.commands:
            self.commands.append(command)
            heredocs = {
                position: next(bodies, "")
                for position, r in enumerate(command.redirections)
                if r.op in ("<<", "<<-")
            }
            self.argv(command.words, depth, wrappers, _Stdin(command, heredocs))

    def argv(
        self,
        words: Sequence[Word],
        depth: int,
        wrappers: tuple[str, ...],
        stdin: _Stdin | None = None,
    ) -> None:
        if not words:
            return
        if depth > MAX_RESOLVE_DEPTH:
            self.fail("commands are nested too deeply to follow")
            return
        program = words[0]
        name = _program_name(program)
        if name is None:
            self.fail(f"the program name {program.raw} is only known when the command runs")
            return
        args = tuple(words[1:])
        self.invocations.append(Invocation(name, tuple(a.value for a in args), wrappers))
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, _Call(name, args, depth, (*wrappers, name), stdin))
        elif name in _LAUNCHERS and args and args[0].bare and args[0].value == _LAUNCHERS[name]:
            self.launched(_Call(name, args[1:], depth, (*wrappers, name), stdin))

    def launched(self, call: _Call) -> None:
        """``uv run CMD``, ``npm exec -- CMD``: options of their own make the command unclear."""
        args = call.args[1:] if call.args and call.args[0].value == "--" else call.args
        if args and args[0].value.startswith("-"):
            self.fail(f"{call.wrappers[-1]}'s options cannot be read before it runs")
            return
        self.argv(args, call.depth + 1, call.wrappers)

    def implied(self, program: str, args: Sequence[str], call: _Call) -> None:
        self.invocations.append(Invocation(program, tuple(args), call.wrappers[:-1], implied=True))

    def run_after_options(
        self,
        call: _Call,
        with_value: str,
        *,
        flags: str = "",
        long_with_value: frozenset[str] = frozenset(),
        long_flags: frozenset[str] | None = None,
        positional: int = 0,
    ) -> None:
        """Run the command that follows the wrapper's options and ``positional`` operands."""
        index = _skip_options(call.args, with_value, flags, long_with_value, long_flags)
        if index is None:
            self.fail(f"{call.name}'s options cannot be read before it runs")
            return
        index += positional
        if index < len(call.args):
            self.argv(call.args[index:], call.depth + 1, call.wrappers)

    def command_string(self, word: Word | None, call: _Call) -> None:
        """``bash -c STRING``, ``su -c STRING``: the string is a command line of its own."""
        if word is None:
            return
        if not word.literal:
            self.fail(f"{call.name} runs a command text that is only known when it runs")
            return
        self.line(word.value, call.depth + 1, call.wrappers)


@dataclass(frozen=True, slots=True)
class _Stdin:
    """Where a command's standard input comes from, as far as it can be a script."""

    command: SimpleCommand
    heredocs: dict[int, str]  # position of a << redirection -> its body

    def script(self) -> str | None:
        """The text a shell would read as its script, ``None`` when it comes from elsewhere."""
        redirections = list(enumerate(self.command.redirections))
        for position, redirection in reversed(redirections):
            if redirection.fd not in ("", "0"):
                continue
            if redirection.op in ("<<", "<<-"):
                return self.heredocs.get(position, "")
            if redirection.op == "<<<":
                target = redirection.target
                return target.value if target.literal else None
            if redirection.op in ("<", "<>", "<&"):
                return None
        return None


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    args: tuple[Word, ...]
    depth: int
    wrappers: tuple[str, ...]
    stdin: _Stdin | None


def resolve(command: str) -> CommandLine:
    """Every program ``command`` runs (see the module docs); never raises."""
    resolver = _Resolver()
    if not isinstance(command, str):
        resolver.fail("the command is not text")
    elif "\x00" in command:
        resolver.fail("the command holds a NUL byte, which no program can be given")
    else:
        resolver.line(command, 0, ())
    return CommandLine(
        tuple(resolver.invocations), tuple(resolver.unresolved), tuple(resolver.commands)
    )


def _program_name(word: Word) -> str | None:
    """The name ``PATH`` lookup uses for a program word, ``None`` if only known at run time."""
    if word.expands or (word.glob and word.value not in ("[", "[[")):
        return None
    value = word.value
    if word.tilde:
        value = value.partition("/")[2] or value
    name = posixpath.basename(value.rstrip("/")) if "/" in value else value
    return name or None


def _skip_options(
    args: Sequence[Word],
    with_value: str,
    flags: str,
    long_with_value: frozenset[str],
    long_flags: frozenset[str] | None,
) -> int | None:
    """The index of the first operand after the options, or ``None`` if they are unreadable.

    Short options in ``with_value`` take a value (attached or the next word); other short
    letters must be in ``flags`` (any letter when ``flags`` is empty and ``long_flags`` is
    None, for wrappers whose flags never take values). ``--`` ends the options.
    """
    strict = long_flags is not None
    index = 0
    while index < len(args):
        word = args[index]
        arg = word.value
        if not word.literal and arg.startswith("-"):
            return None
        if arg == "--":
            return index + 1
        if arg.startswith("--"):
            name = arg.split("=", 1)[0]
            if name in long_with_value:
                index += 1 if "=" in arg else 2
                continue
            if strict and name not in (long_flags or ()):
                return None
            index += 1
            continue
        if not arg.startswith("-") or arg == "-":
            return index
        letters = arg[1:]
        for position, letter in enumerate(letters):
            if letter in with_value:
                index += 1 if position + 1 < len(letters) else 2
                break
            if strict and letter not in flags:
                return None
        else:
            index += 1
    return index


# ----- handlers: one per program that runs another -----


def _env(resolver: _Resolver, call: _Call) -> None:
    """``env [-i] [-u NAME] [-C DIR] [-S STRING] [NAME=VALUE ...] COMMAND ...``."""
    args = call.args
    index = 0
    while index < len(args):
        word = args[index]
        arg = word.value
        if _ASSIGNMENT.match(word.raw) or arg in ("-", "--"):
            index += 1
            continue
        if not arg.startswith("-"):
            break
        if not word.literal:
            resolver.fail("env's options are only known when it runs")
            return
        if arg.startswith("--"):
            name, has_value, value = arg.partition("=")
            if name == "--split-string":
                text = value if has_value else None
                _env_split(resolver, call, text, index + (0 if has_value else 1))
                return
            index += 2 if name in ("--unset", "--chdir") and not has_value else 1
            continue
        letters = arg[1:]
        for position, letter in enumerate(letters):
            rest = letters[position + 1 :]
            if letter == "S":
                _env_split(resolver, call, rest or None, index + (0 if rest else 1))
                return
            if letter in "uCP":
                index += 1 if rest else 2
                break
        else:
            index += 1
    if index < len(args):
        resolver.argv(args[index:], call.depth + 1, call.wrappers)


def _env_split(resolver: _Resolver, call: _Call, text: str | None, index: int) -> None:
    """``env -S STRING ARGS``: STRING is split into words and ARGS follow them."""
    if text is None:
        following = call.args[index] if index < len(call.args) else None
        if following is None or not following.literal:
            resolver.fail("env -S runs a command text that is only known when it runs")
            return
        text = following.value
    tail = " ".join(_quote(a.value) for a in call.args[index + 1 :])
    resolver.line(f"{text} {tail}".strip(), call.depth + 1, call.wrappers)


def _command(resolver: _Resolver, call: _Call) -> None:
    index = _skip_options(call.args, "", "pvV", frozenset(), frozenset())
    if index is None:
        resolver.fail("command's options cannot be read before it runs")
        return
    if any(a.value.startswith("-") and set(a.value[1:]) & {"v", "V"} for a in call.args[:index]):
        return  # `command -v rm` only says where rm is
    if index < len(call.args):
        resolver.argv(call.args[index:], call.depth + 1, call.wrappers)


def _simple_wrapper(
    with_value: str = "",
    flags: str = "",
    *,
    long_with_value: frozenset[str] = frozenset(),
    positional: int = 0,
) -> _Handler:
    """A wrapper whose options come first, then ``positional`` operands, then the command."""

    def handle(resolver: _Resolver, call: _Call) -> None:
        resolver.run_after_options(
            call, with_value, flags=flags, long_with_value=long_with_value, positional=positional
        )

    return handle


def _nice(resolver: _Resolver, call: _Call) -> None:
    args = call.args
    if args and re.fullmatch(r"-\d+", args[0].value):  # old style: nice -5 cmd
        resolver.argv(args[1:], call.depth + 1, call.wrappers)
        return
    resolver.run_after_options(call, "n", long_with_value=frozenset({"--adjustment"}))


_SUDO_LONG_WITH_VALUE = frozenset(
    {"--chdir", "--close-from", "--group", "--host", "--prompt", "--chroot", "--role", "--type",
     "--command-timeout", "--other-user", "--user"}
)  # fmt: skip
_SUDO_LONG_FLAGS = frozenset(
    {"--askpass", "--background", "--bell", "--preserve-env", "--edit", "--set-home", "--login",
     "--remove-timestamp", "--reset-timestamp", "--list", "--non-interactive",
     "--preserve-groups", "--stdin", "--shell", "--validate", "--version"}
)  # fmt: skip
_XARGS_LONG_WITH_VALUE = frozenset(
    {"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars",
     "--process-slot-var"}
)  # fmt: skip


def _sudo(resolver: _Resolver, call: _Call) -> None:
    resolver.run_after_options(
        call,
        "CDghpRrTtUu",
        flags="AbEeHiKklnPSsVvB",
        long_with_value=_SUDO_LONG_WITH_VALUE,
        long_flags=_SUDO_LONG_FLAGS,
    )


def _xargs(resolver: _Resolver, call: _Call) -> None:
    index = _skip_options(
        call.args,
        "adEILnPs",
        "0oprtxeil",
        _XARGS_LONG_WITH_VALUE,
        None,
    )
    if index is None:
        resolver.fail("xargs's options cannot be read before it runs")
        return
    if index < len(call.args):
        resolver.argv(call.args[index:], call.depth + 1, call.wrappers)
    else:
        resolver.implied("echo", (), call)


def _find(resolver: _Resolver, call: _Call) -> None:
    args = call.args
    starts = []
    for word in args:
        if word.value.startswith(("-", "(", "!")) and word.value not in ("-H", "-L", "-P"):
            break
        if word.value not in ("-H", "-L", "-P"):
            starts.append(word.value)
    index = 0
    while index < len(args):
        value = args[index].value
        if value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < len(args) and args[end].value not in (";", "+"):
                end += 1
            resolver.argv(args[index + 1 : end], call.depth + 1, call.wrappers)
            index = end
        elif value == "-delete":
            resolver.implied("rm", starts or ["."], call)
        index += 1


def _unlink(resolver: _Resolver, call: _Call) -> None:
    resolver.implied("rm", [a.value for a in call.args], call)


def _shell(resolver: _Resolver, call: _Call) -> None:
    args = call.args
    index, runs_string = 0, False
    while index < len(args):
        word = args[index]
        arg = word.value
        if not word.literal and arg.startswith(("-", "+")):
            resolver.fail(f"{call.name}'s options are only known when it runs")
            return
        if arg in ("--", "-"):
            index += 1
            break
        if arg in ("--rcfile", "--init-file", "-o", "+o", "-O", "+O"):
            index += 2
        elif arg.startswith("--") or (arg.startswith("+") and len(arg) > 1):
            index += 1
        elif arg.startswith("-") and len(arg) > 1:
            runs_string = runs_string or "c" in arg[1:]
            index += 2 if arg[-1] in "oO" else 1
        else:
            break
    operand = args[index] if index < len(args) else None
    if runs_string:
        resolver.command_string(operand, call)
        return
    if operand is not None:
        return  # a script file: opaque, like any other program
    script = call.stdin.script() if call.stdin is not None else None
    if script is None:
        resolver.fail(f"{call.name} reads its commands from its input, which is not visible here")
        return
    resolver.line(script, call.depth + 1, call.wrappers)


def _eval(resolver: _Resolver, call: _Call) -> None:
    if not all(a.literal for a in call.args):
        resolver.fail("eval runs a command text that is only known when it runs")
        return
    resolver.line(" ".join(a.value for a in call.args), call.depth + 1, call.wrappers)


def _trap(resolver: _Resolver, call: _Call) -> None:
    args = [a for a in call.args if a.value != "--"]
    if len(args) >= 2 and not args[0].value.startswith("-"):
        resolver.command_string(args[0], call)


def _option_string(with_value: str) -> _Handler:
    """``su -c STRING``, ``script -qc STRING``, ``runuser -u USER -- CMD``: a command text, or
    (runuser) a command after the options."""

    def handle(resolver: _Resolver, call: _Call) -> None:
        args = call.args
        index = 0
        while index < len(args):
            word = args[index]
            value = word.value
            following = args[index + 1] if index + 1 < len(args) else None
            if value == "--" or not value.startswith("-"):
                index += 1
                continue
            if value.startswith("--"):
                if value == "--command":
                    resolver.command_string(following, call)
                    return
                if value.startswith("--command="):
                    resolver.command_string(_tail(word, len("--command=")), call)
                    return
                index += 1
                continue
            for position, letter in enumerate(value[1:], start=1):
                if letter == "c":
                    rest = position + 1 < len(value)
                    resolver.command_string(_tail(word, position + 1) if rest else following, call)
                    return
                if letter in with_value:
                    index += 0 if position + 1 < len(value) else 1
                    break
            index += 1
        if call.name == "runuser":
            resolver.run_after_options(call, with_value)

    return handle


def _tail(word: Word, offset: int) -> Word:
    """The value of ``word`` after its first ``offset`` characters (an option's attached value)."""
    return Word(word.value[offset:], word.raw, word.expands, word.glob)


def _flock(resolver: _Resolver, call: _Call) -> None:
    for index, word in enumerate(call.args):
        if word.value in ("-c", "--command"):
            after = call.args[index + 1] if index + 1 < len(call.args) else None
            resolver.command_string(after, call)
            return
    resolver.run_after_options(
        call, "wEc", long_with_value=frozenset({"--timeout", "--conflict-exit-code"}), positional=1
    )


def _watch(resolver: _Resolver, call: _Call) -> None:
    index = _skip_options(
        call.args, "nqd", "bcegptxwr", frozenset({"--interval", "--differences"}), None
    )
    if index is None or index >= len(call.args):
        return
    if any(a.value in ("-x", "--exec") for a in call.args[:index]):
        resolver.argv(call.args[index:], call.depth + 1, call.wrappers)
        return
    rest = call.args[index:]
    if not all(a.literal for a in rest):
        resolver.fail("watch runs a command text that is only known when it runs")
        return
    resolver.line(" ".join(a.value for a in rest), call.depth + 1, call.wrappers)


def _busybox(resolver: _Resolver, call: _Call) -> None:
    resolver.argv(call.args, call.depth + 1, call.wrappers)


def _hash(resolver: _Resolver, call: _Call) -> None:
    if any(a.value.startswith("-") and "p" in a.value[1:] for a in call.args):
        resolver.fail("hash -p makes a program name run another program")


def _shopt(resolver: _Resolver, call: _Call) -> None:
    if any(a.value == "expand_aliases" for a in call.args):
        resolver.fail("aliases are switched on, so a name may run anything")


def _enable(resolver: _Resolver, call: _Call) -> None:
    if any(a.value.startswith("-") and "f" in a.value[1:] for a in call.args):
        resolver.fail("enable -f loads a builtin from a library")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


_Handler = Callable[[_Resolver, _Call], None]

_HANDLERS: dict[str, _Handler] = {
    "env": _env,
    "command": _command,
    "builtin": _simple_wrapper(),
    "exec": _simple_wrapper("a", "cl"),
    "nohup": _simple_wrapper(),
    "time": _simple_wrapper("of", "pvaq"),
    "nice": _nice,
    "ionice": _simple_wrapper("cnpPu", "t"),
    "timeout": _simple_wrapper(
        "ks",
        "v",
        long_with_value=frozenset({"--kill-after", "--signal"}),
        positional=1,
    ),
    "stdbuf": _simple_wrapper("ioe", long_with_value=frozenset({"--input", "--output", "--error"})),
    "setsid": _simple_wrapper("", "cfw"),
    "sudo": _sudo,
    "doas": _simple_wrapper("uC", "ns"),
    "pkexec": _simple_wrapper(long_with_value=frozenset({"--user"})),
    "runuser": _option_string("ugGw"),
    "su": _option_string("sgGw"),
    "script": _option_string("EIOT"),
    "xargs": _xargs,
    "find": _find,
    "unlink": _unlink,
    "chroot": _simple_wrapper(long_with_value=frozenset({"--userspec", "--groups"}), positional=1),
    "taskset": _simple_wrapper("", "apc", positional=1),
    "chrt": _simple_wrapper("T", "abdfiormRpve", positional=1),
    "unbuffer": _simple_wrapper("", "p"),
    "strace": _simple_wrapper("abeEIoOpPsSuUX", "cCdDfFhikqrtTvVwxyYzZ"),
    "ltrace": _simple_wrapper("aAeEfFlnopsSuxX", "bcCDhiLrStTV"),
    "valgrind": _simple_wrapper("", "hqv"),
    "fakeroot": _simple_wrapper("is", "hu"),
    "unshare": _simple_wrapper("GSRw", "CfimnprTUuc"),
    "firejail": _simple_wrapper(),
    "sg": _option_string(""),
    "flock": _flock,
    "watch": _watch,
    "busybox": _busybox,
    "toybox": _busybox,
    "eval": _eval,
    "trap": _trap,
    "hash": _hash,
    "shopt": _shopt,
    "enable": _enable,
    **dict.fromkeys(_SHELLS, _shell),
}
