"""The ``cairn`` command as a typer app: help, errors, ``demo``, ``memory`` and every other form.

The options are declared in :mod:`cairn.cli.options`; what each command runs is in
:mod:`cairn.cli.dispatch` (``run_root``, ``run_serve``), which the fast path calls too.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from cairn.cli.options import (
    ROOT_OPTIONS,
    SERVE_OPTIONS,
    Format,
    Mode,
    OptionSpec,
    RootOptions,
    ServeOptions,
)
from cairn.cli.typer_values import check_values_on_use
from cairn.values import replace

__all__ = [
    "COMMAND_GROUPS",
    "CommandGroup",
    "app",
    "command_names",
    "group_app",
    "mount_command_groups",
    "root_options",
    "serve_options",
]

check_values_on_use()  # typer's pydantic checks only for values they could change

app = typer.Typer(
    add_completion=False,
    help=(
        "cairn: a terminal AI coding agent with a managed long-term memory.\n\n"
        '`cairn` opens the terminal UI, `cairn "PROMPT"` opens it with a first prompt, '
        '`cairn -p "PROMPT"` runs one turn and prints the answer (a prompt on stdin works too).'
    ),
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

_R = ROOT_OPTIONS
_S = SERVE_OPTIONS
_SERVE_DEFAULTS = ServeOptions()  # the defaults are declared once, in cli/options.py
_DEFAULT_FORMAT = Format(RootOptions().output_format)


def _opt(spec: OptionSpec) -> Any:
    return typer.Option(*spec.names, help=spec.help, envvar=spec.envvar)


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    prompt: Annotated[str | None, _opt(_R["prompt"])] = None,
    output_format: Annotated[Format, _opt(_R["output_format"])] = _DEFAULT_FORMAT,
    max_session_turns: Annotated[int | None, _opt(_R["max_session_turns"])] = None,
    approval_mode: Annotated[Mode | None, _opt(_R["approval_mode"])] = None,
    yolo: Annotated[bool, _opt(_R["yolo"])] = False,
    resume: Annotated[str | None, _opt(_R["resume"])] = None,
    continue_latest: Annotated[bool, _opt(_R["continue_latest"])] = False,
    model: Annotated[str | None, _opt(_R["model"])] = None,
    no_wait_memory: Annotated[bool, _opt(_R["no_wait_memory"])] = False,
    wait_memory: Annotated[bool, _opt(_R["wait_memory"])] = False,
    include_partial_messages: Annotated[bool, _opt(_R["include_partial_messages"])] = False,
    acp: Annotated[bool, _opt(_R["acp"])] = False,
    version: Annotated[bool, _opt(_R["version"])] = False,
    sandbox: Annotated[bool, _opt(_R["sandbox"])] = False,
    trust: Annotated[bool, _opt(_R["trust"])] = False,
    proxy: Annotated[str | None, _opt(_R["proxy"])] = None,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    from cairn.cli.dispatch import run_root

    options = root_options(ctx.params)
    if isinstance(ctx.obj, str):  # `cairn fix the bug`: main() passes the words
        options = replace(options, initial_prompt=ctx.obj)
    raise typer.Exit(run_root(options))


@app.command()
def demo(
    keep: Annotated[bool, typer.Option(help="Keep the temporary project afterwards.")] = False,
) -> None:
    """Run a scripted session against the built-in scripted model (no API key needed)."""
    from cairn.demo import run_demo

    raise typer.Exit(run_demo(keep=keep))


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[str, _opt(_S["host"])] = _SERVE_DEFAULTS.host,
    port: Annotated[int, _opt(_S["port"])] = _SERVE_DEFAULTS.port,
    token: Annotated[str | None, _opt(_S["token"])] = None,
    token_file: Annotated[Path | None, _opt(_S["token_file"])] = None,
    allow_origin: Annotated[list[str] | None, _opt(_S["allow_origin"])] = None,
    max_sessions: Annotated[int, _opt(_S["max_sessions"])] = _SERVE_DEFAULTS.max_sessions,
    workspace: Annotated[Path | None, _opt(_S["workspace"])] = None,
    sandbox: Annotated[bool, _opt(_S["sandbox"])] = False,
    trust: Annotated[bool, _opt(_S["trust"])] = False,
    proxy: Annotated[str | None, _opt(_S["proxy"])] = None,
    tenant_header: Annotated[str | None, _opt(_S["tenant_header"])] = None,
    allow_private_mcp: Annotated[bool, _opt(_S["allow_private_mcp"])] = False,
    workspace_root: Annotated[Path | None, _opt(_S["workspace_root"])] = None,
    database: Annotated[str | None, _opt(_S["database"])] = None,
    replica_id: Annotated[str | None, _opt(_S["replica_id"])] = None,
    advertise_url: Annotated[str | None, _opt(_S["advertise_url"])] = None,
    lease_seconds: Annotated[float | None, _opt(_S["lease_seconds"])] = None,
    drain_seconds: Annotated[float | None, _opt(_S["drain_seconds"])] = None,
) -> None:
    """Serve cairn sessions over HTTP for editors, scripts and the Python SDK."""
    from cairn.cli.dispatch import run_serve

    raise typer.Exit(run_serve(serve_options(ctx.params)))


@app.command()
def rewind(
    turn: Annotated[int | None, typer.Argument(help="The turn to go back to before.")] = None,
    list_turns: Annotated[
        bool, typer.Option("--list", help="List the turns (newest first) and exit.")
    ] = False,
    code_only: Annotated[bool, typer.Option("--code-only", help="Restore the files only.")] = False,
    conversation_only: Annotated[
        bool, typer.Option("--conversation-only", help="Rewind the conversation only.")
    ] = False,
    undo: Annotated[bool, typer.Option("--undo", help="Reverse the last rewind.")] = False,
    session: Annotated[
        str | None, typer.Option(help="The session (default: the project's latest).")
    ] = None,
) -> None:
    """Go back to before a turn of a recorded session: code, conversation, or both."""
    from cairn.cli.rewind_cmd import run_rewind

    raise typer.Exit(
        run_rewind(
            turn=turn,
            list_turns=list_turns,
            code_only=code_only,
            conversation_only=conversation_only,
            undo=undo,
            session_id=session,
            cwd=Path.cwd(),
        )
    )


@app.command()
def trust(
    path: Annotated[
        Path | None, typer.Argument(help="The folder (default: the current project).")
    ] = None,
    list_folders: Annotated[
        bool, typer.Option("--list", help="List the folders trusted or declined.")
    ] = False,
    revoke: Annotated[bool, typer.Option("--revoke", help="Forget the folder's trust.")] = False,
) -> None:
    """Trust a folder: its project hooks, MCP servers and permission settings may be used."""
    from cairn.cli.trust_cmd import run_trust

    raise typer.Exit(run_trust(path=path, list_folders=list_folders, revoke=revoke, cwd=Path.cwd()))


def root_options(params: Mapping[str, Any]) -> RootOptions:
    """The root callback's parsed parameters as :class:`RootOptions` (enums as their values)."""
    values: dict[str, Any] = {
        k: v.value if isinstance(v, StrEnum) else v for k, v in params.items()
    }
    return RootOptions(**values)


def serve_options(params: Mapping[str, Any]) -> ServeOptions:
    """``serve``'s parsed parameters as :class:`ServeOptions`."""
    return ServeOptions(**{**params, "allow_origin": tuple(params.get("allow_origin") or ())})


class CommandGroup(NamedTuple):
    """A command group (``cairn memory ...``) whose module is imported only when it is run."""

    name: str
    module: str  # the module that defines it
    attribute: str  # its typer.Typer in that module
    help: str  # the line ``cairn --help`` shows for it


# Every command group, in the order ``cairn --help`` lists them: a new group is one more row.
COMMAND_GROUPS: tuple[CommandGroup, ...] = (
    CommandGroup(
        "memory",
        "cairn.cli.memory_cmd",
        "memory_app",
        "List, search, recall, forget and restore memories.",
    ),
    CommandGroup(
        "mcp", "cairn.cli.mcp_cmd", "mcp_app", "List, inspect, add and remove MCP servers."
    ),
    CommandGroup(
        "db",
        "cairn.cli.db_cmd",
        "db_app",
        "Create or upgrade cairn's tables in a PostgreSQL database (sessions, memory).",
    ),
)


def group_app(name: str) -> typer.Typer:
    """A new typer app for the commands of group ``name``, with the help ``cairn --help`` shows."""
    group = next(group for group in COMMAND_GROUPS if group.name == name)
    return typer.Typer(
        name=group.name,
        help=group.help,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )


def mount_command_groups(argv: Sequence[str]) -> None:
    """Add every group to the app: the one ``argv`` runs for real, the others by name and help.

    The groups' modules import the packages they manage (memory, MCP, ...); ``cairn --help``
    and the other commands list them without paying for those imports.
    """
    invoked = argv[0] if argv else None
    mounted = {info.name: info for info in app.registered_groups}
    for group in COMMAND_GROUPS:
        real = group.name == invoked
        if group.name in mounted and (not real or group.name in _MOUNTED_FOR_REAL):
            continue  # called again (a test mounting each group): keep what is there
        if real:
            sub_app = getattr(importlib.import_module(group.module), group.attribute)
            _MOUNTED_FOR_REAL.add(group.name)
            if group.name in mounted:  # replace the stand-in
                app.registered_groups.remove(mounted[group.name])
        else:
            sub_app = typer.Typer()
        app.add_typer(sub_app, name=group.name, help=group.help)


_MOUNTED_FOR_REAL: set[str] = set()  # groups whose real commands are on the app


def command_names() -> set[str]:
    """Every ``cairn <command>``: a first word that is none of these is a prompt."""
    commands = {
        info.name or info.callback.__name__ for info in app.registered_commands if info.callback
    }
    return commands | {group.name for group in COMMAND_GROUPS}
