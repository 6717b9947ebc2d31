"""The options of ``cairn`` and ``cairn serve``, declared once, and a parser for the common forms.

The typer app (:mod:`cairn.cli.app`) builds its parameters from these declarations (names, help,
choices, environment variable). :func:`parse_fast` reads the same declarations to parse the
command lines that start an agent — ``cairn -p ...``, ``cairn --acp ...``, ``cairn serve ...`` —
without importing typer and its click copy, which costs 0.1–0.2 s of a start-up whose budget
is 0.3 s (``cairn -p``) to 1 s (``cairn --acp``). It accepts only plain forms whose meaning is
certain; anything else (help, ``--version``, an unknown or repeated option, a missing or invalid
value, a value that starts with ``-``, joined short flags) returns ``None`` and goes through typer,
which prints its usual messages. A test checks that both parsers agree on what this one accepts.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from cairn.values import Value, replace

__all__ = [
    "ROOT_OPTIONS",
    "SERVE_OPTIONS",
    "Format",
    "Mode",
    "OptionSpec",
    "RootOptions",
    "ServeOptions",
    "misspelt_command",
    "parse_fast",
    "split_initial_prompt",
    "with_bare_prompt",
]


class Format(StrEnum):
    text = "text"
    json = "json"
    stream_json = "stream-json"


class Mode(StrEnum):
    plan = "plan"
    default = "default"
    auto_edit = "auto-edit"
    yolo = "yolo"


Kind = Literal["flag", "text", "int", "float", "path", "choice", "multi"]


# Values rather than NamedTuples or dataclasses: nothing compiled when their classes are made
# (a NamedTuple of this module compiled each field's postponed annotation, ~10 M in all).


class OptionSpec(Value):
    """One command-line option: its parameter name, flags, help and how its value is read."""

    dest: str
    names: tuple[str, ...]
    help: str
    kind: Kind = "text"
    choices: tuple[str, ...] = ()
    envvar: str | None = None


SANDBOX_HELP = "Run shell commands in the bubblewrap sandbox (as CAIRN_SANDBOX=1)."
TRUST_HELP = "Use this folder's project hooks, MCP servers and permissions for this run."
PROXY_HELP = (
    "Reach the model endpoint through this HTTP proxy (http://[user:password@]host:port; as "
    "CAIRN_PROXY, over the proxy setting and HTTPS_PROXY)."
)


def _options(*specs: OptionSpec) -> dict[str, OptionSpec]:
    return {spec.dest: spec for spec in specs}


ROOT_OPTIONS = _options(
    OptionSpec("prompt", ("--prompt", "-p"), "Run one turn without a UI and exit."),
    OptionSpec(
        "output_format",
        ("--output-format", "-o"),
        "Headless output format.",
        kind="choice",
        choices=tuple(Format),
    ),
    OptionSpec(
        "max_session_turns",
        ("--max-session-turns",),
        "Stop after this many model requests.",
        kind="int",
    ),
    OptionSpec(
        "approval_mode",
        ("--approval-mode",),
        "When to ask before running tools.",
        kind="choice",
        choices=tuple(Mode),
    ),
    OptionSpec("yolo", ("--yolo", "-y"), "Never ask (approval mode yolo).", kind="flag"),
    OptionSpec("resume", ("--resume",), "Resume a session by ID."),
    OptionSpec(
        "continue_latest",
        ("--continue", "-c"),
        "Resume the latest session of this project.",
        kind="flag",
    ),
    OptionSpec("model", ("--model", "-m"), "The model to use."),
    OptionSpec(
        "no_wait_memory",
        ("--no-wait-memory",),
        "With -p: save no memory now; the project's next session extracts this one.",
        kind="flag",
    ),
    OptionSpec(
        "wait_memory",
        ("--wait-memory",),
        "With -p: save memory in this process before exiting instead of in a background"
        " worker (for a container that ends with the command).",
        kind="flag",
    ),
    OptionSpec(
        "include_partial_messages",
        ("--include-partial-messages",),
        "With -o stream-json: also write each answer as it streams (stream_event messages).",
        kind="flag",
    ),
    OptionSpec("acp", ("--acp",), "Serve the Agent Client Protocol on stdio.", kind="flag"),
    OptionSpec("version", ("--version",), "Print the version and exit.", kind="flag"),
    OptionSpec("sandbox", ("--sandbox",), SANDBOX_HELP, kind="flag"),
    OptionSpec("trust", ("--trust",), TRUST_HELP, kind="flag"),
    OptionSpec("proxy", ("--proxy",), PROXY_HELP),
)

SERVE_OPTIONS = _options(
    OptionSpec("host", ("--host", "--hostname"), "Address to bind."),
    OptionSpec("port", ("--port",), "Port (0 picks a free one).", kind="int"),
    OptionSpec(
        "token",
        ("--token",),
        "Bearer token (or CAIRN_SERVER_TOKEN). Given here, every local user sees it in the "
        "process list: prefer --token-file.",
        envvar="CAIRN_SERVER_TOKEN",
    ),
    OptionSpec(
        "token_file",
        ("--token-file",),
        "Read the bearer token from this file (or CAIRN_SERVER_TOKEN_FILE).",
        kind="path",
        envvar="CAIRN_SERVER_TOKEN_FILE",
    ),
    OptionSpec(
        "allow_origin",
        ("--allow-origin",),
        "Allow browser requests from this origin.",
        kind="multi",
    ),
    OptionSpec("max_sessions", ("--max-sessions",), "Most live sessions at once.", kind="int"),
    OptionSpec(
        "workspace", ("--workspace",), "The workspace (default: the current folder).", kind="path"
    ),
    OptionSpec("sandbox", ("--sandbox",), SANDBOX_HELP, kind="flag"),
    OptionSpec("trust", ("--trust",), TRUST_HELP, kind="flag"),
    OptionSpec("proxy", ("--proxy",), PROXY_HELP),
    OptionSpec(
        "tenant_header",
        ("--tenant-header",),
        "Serve many tenants: each request names its tenant in this header (needs --token).",
    ),
    OptionSpec(
        "allow_private_mcp",
        ("--allow-private-mcp",),
        "With --tenant-header: let the HTTP MCP servers tenants pass reach loopback and "
        "private addresses.",
        kind="flag",
    ),
    OptionSpec(
        "workspace_root",
        ("--workspace-root",),
        "With --tenant-header: each tenant works in its own folder under this one.",
        kind="path",
    ),
    OptionSpec(
        "database",
        ("--database",),
        "Keep sessions in this PostgreSQL database (or CAIRN_DATABASE_URL): several replicas "
        "serve them.",
        envvar="CAIRN_DATABASE_URL",
    ),
    OptionSpec(
        "replica_id",
        ("--replica-id",),
        "With --database: this replica's name (default: host, process id and a random part).",
    ),
    OptionSpec(
        "advertise_url",
        ("--advertise-url",),
        "With --database: the URL the other replicas reach this one at.",
    ),
    OptionSpec(
        "lease_seconds",
        ("--lease-seconds",),
        "With --database: how long a replica's hold on a session lasts unless renewed (default "
        "6; a dead replica's sessions move after it).",
        kind="float",
    ),
    OptionSpec(
        "drain_seconds",
        ("--drain-seconds",),
        "With --database: on SIGTERM, how long running turns get to end (default 30).",
        kind="float",
    ),
)


class RootOptions(Value):
    """``cairn [options]``: what the root command was asked to do."""

    prompt: str | None = None
    output_format: str = Format.text.value
    max_session_turns: int | None = None
    approval_mode: str | None = None
    yolo: bool = False
    resume: str | None = None
    continue_latest: bool = False
    model: str | None = None
    no_wait_memory: bool = False
    wait_memory: bool = False
    include_partial_messages: bool = False
    acp: bool = False
    version: bool = False
    sandbox: bool = False
    trust: bool = False
    proxy: str | None = None
    initial_prompt: str | None = None  # `cairn "fix the bug"`: the UI's first prompt


class ServeOptions(Value):
    """``cairn serve [options]``."""

    host: str = "127.0.0.1"
    port: int = 4170
    token: str | None = None
    token_file: Path | None = None
    allow_origin: tuple[str, ...] = ()
    max_sessions: int = 64
    workspace: Path | None = None
    sandbox: bool = False
    trust: bool = False
    proxy: str | None = None
    tenant_header: str | None = None
    allow_private_mcp: bool = False
    workspace_root: Path | None = None
    database: str | None = None
    replica_id: str | None = None
    advertise_url: str | None = None
    lease_seconds: float | None = None
    drain_seconds: float | None = None


def parse_fast(
    argv: Sequence[str], environ: Mapping[str, str] = os.environ
) -> RootOptions | ServeOptions | None:
    """The options of a plain ``cairn [root options]`` or ``cairn serve [serve options]``.

    ``None`` when the command line needs typer: another subcommand, help, ``--version`` or
    anything this parser is not certain to read exactly as typer would.
    """
    if argv and argv[0] == "serve":
        values = _parse(argv[1:], SERVE_OPTIONS)
        if values is None:
            return None
        for spec in SERVE_OPTIONS.values():
            if spec.envvar and spec.dest not in values:
                raw = environ.get(spec.envvar) or None  # typer ignores ""
                values[spec.dest] = Path(raw) if raw and spec.kind == "path" else raw
        return replace(ServeOptions(), **values)
    values = _parse(argv, ROOT_OPTIONS)
    if values is None or values.get("version"):
        return None
    return replace(RootOptions(), **values)


def with_bare_prompt(argv: Sequence[str]) -> list[str]:
    """``argv`` with an empty value after a ``-p`` that has none (last, or followed by another
    root option), so ``git diff | cairn -p -o json`` reads its prompt from stdin, as
    ``claude -p`` does, instead of taking ``-o`` as the prompt."""
    options = {*_ROOT_NAMES, "--help"}
    out = list(argv)
    for index, spec in _root_tokens(argv):
        if spec is None:
            break  # a subcommand or a stray argument: typer reads the rest
        if spec.dest != "prompt" or "=" in argv[index]:
            continue
        following = argv[index + 1] if index + 1 < len(argv) else None
        if following is None or following.partition("=")[0] in options:
            out.insert(index + 1 + (len(out) - len(argv)), "")
    return out


def split_initial_prompt(
    argv: Sequence[str], commands: Collection[str]
) -> tuple[list[str], str | None]:
    """``cairn fix the bug`` / ``cairn "fix the bug" -m x``: the options, and the words that
    name no command joined as the first prompt (``None``: the first word is a command, or
    there are no words). Unknown options stay with the options, for typer to report."""
    rest: list[str] = []
    words: list[str] = []
    for index, spec in _root_tokens(argv):
        token = argv[index]
        if spec is not None:
            rest.append(token)
            if spec.kind != "flag" and "=" not in token and index + 1 < len(argv):
                rest.append(argv[index + 1])
        elif token.startswith("-"):
            rest.append(token)
        elif not words and token in commands:
            return list(argv), None
        else:
            words.append(token)
    return (rest, " ".join(words)) if words else (list(argv), None)


def misspelt_command(argv: Sequence[str], commands: Collection[str]) -> str | None:
    """The command that ``argv``'s first word is a slip of (``cairn memroy list`` →
    ``memory``), or ``None`` when it reads as a prompt. A quoted prompt (with spaces) is never
    a typo."""
    word = next((argv[i] for i, spec in _root_tokens(argv) if spec is None), "")
    if word.startswith("-") or " " in word or len(word) < 3 or word in commands:
        return None
    import difflib

    close = difflib.get_close_matches(word.lower(), sorted(commands), n=1, cutoff=0.75)
    return close[0] if close else None


_ROOT_NAMES = {name: spec for spec in ROOT_OPTIONS.values() for name in spec.names}


def _root_tokens(argv: Sequence[str]) -> Iterator[tuple[int, OptionSpec | None]]:
    """Each root option (with its spec; its value is skipped) or other token, by index."""
    index = 0
    while index < len(argv):
        arg = argv[index]
        name = arg.partition("=")[0] if arg.startswith("--") else arg
        spec = _ROOT_NAMES.get(name)
        yield index, spec
        takes_next = spec is not None and spec.kind != "flag" and "=" not in arg
        index += 2 if takes_next else 1


def _parse(argv: Sequence[str], specs: Mapping[str, OptionSpec]) -> dict[str, Any] | None:
    by_name = {name: spec for spec in specs.values() for name in spec.names}
    values: dict[str, Any] = {}
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        name, has_inline, inline = arg.partition("=")
        if not name.startswith("--"):
            name, has_inline = arg, ""  # short options take their value as the next argument
        spec = by_name.get(name)
        if spec is None or (spec.dest in values and spec.kind != "multi"):
            return None
        if spec.kind == "flag":
            if has_inline:
                return None
            values[spec.dest] = True
            continue
        if has_inline:
            raw = inline
        elif rest:
            raw = rest.pop(0)
        else:
            return None
        value = _convert(spec, raw)
        if value is None:
            return None
        if spec.kind == "multi":
            values[spec.dest] = (*values.get(spec.dest, ()), value)
        else:
            values[spec.dest] = value
    return values


def _convert(spec: OptionSpec, raw: str) -> object | None:
    """``raw`` as the option's value, or ``None`` when typer should judge it."""
    if raw.startswith("-"):
        return None  # a value or a forgotten value? typer decides
    if spec.kind == "int":
        return int(raw) if raw.isascii() and raw.isdigit() else None
    if spec.kind == "float":  # plain decimals only: typer judges "1e3", "inf", " 2"
        whole, _, part = raw.partition(".")
        plain = raw.isascii() and whole.isdigit() and (part.isdigit() or "." not in raw)
        return float(raw) if plain else None
    if spec.kind == "choice":
        return raw if raw in spec.choices else None
    if spec.kind == "path":
        return Path(raw) if raw else None
    return raw
