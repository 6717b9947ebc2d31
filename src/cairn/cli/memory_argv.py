"""``cairn memory search|show|forget|list`` read without typer: the quick path to their work.

Importing typer (with click and the pydantic it loads) costs more than a search's own work on a
large memory, so :func:`cairn.cli.main.main` hands these command lines here first. Only the
plainest forms are read (the subcommand right after ``memory``, its one argument, its own
options spelt ``--limit N``, ``--limit=N``, ``-n N``, ``--yes``, ``-y``, each at most once);
anything else (``--help``, ``--tenant``, an unknown or repeated option, a value typer would
refuse, a second argument) returns None and the typer app reads the command line as before,
with its help and its error messages. The work is :mod:`cairn.cli.memory_actions`', which the
typer commands call too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["QuickCommand", "read_quick", "run_quick"]

_MAX_DIGITS = 9  # a --limit this long at most (int() and typer agree on ASCII digits)
_OPTIONS: dict[str, dict[str, str]] = {  # each subcommand's options: spelling -> name
    "search": {"--limit": "limit", "-n": "limit"},
    "show": {},
    "forget": {"--yes": "yes", "-y": "yes"},
    "list": {"--limit": "limit", "-n": "limit"},
}
_TAKES_VALUE = frozenset({"limit"})
_ARGUMENTS = {"search": 1, "show": 1, "forget": 1, "list": 0}
_TENANT_VARIABLE = "CAIRN_MEMORY_TENANT"  # `cairn memory --tenant`'s variable: typer reads it


@dataclass(frozen=True, slots=True)
class QuickCommand:
    """A ``cairn memory`` command line read without typer."""

    name: str  # search, show, forget, list
    argument: str = ""  # the query, reference or text ("" for list)
    limit: int | None = None  # --limit (None: the command's default)
    yes: bool = False  # forget --yes


def read_quick(argv: Sequence[str], environ: Mapping[str, str] = os.environ) -> QuickCommand | None:
    """The command ``argv`` (``cairn``'s arguments) names, when it is one of the forms above
    and typer would read it to the same values; None otherwise."""
    if len(argv) < 2 or argv[0] != "memory" or argv[1] not in _OPTIONS:
        return None
    if _TENANT_VARIABLE in environ:
        return None  # the memory of a tenant: typer's option reads the variable
    name, options = argv[1], _OPTIONS[argv[1]]
    values: dict[str, str | bool] = {}
    arguments: list[str] = []
    rest = list(argv[2:])
    while rest:
        word = rest.pop(0)
        if word == "-":
            return None  # (click reads it as an argument; a file name elsewhere: not ours)
        if not word.startswith("-"):
            arguments.append(word)
            continue
        spelling, equals, value = word.partition("=")
        option = options.get(spelling)
        if option is None or option in values or (equals and option not in _TAKES_VALUE):
            return None  # help, `--`, a typo, a repeat: typer's to answer
        if option not in _TAKES_VALUE:
            values[option] = True
            continue
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        if spelling == "-n" and equals:
            return None  # `-n=5`: click reads "=5"
        values[option] = value
    if len(arguments) != _ARGUMENTS[name]:
        return None
    limit = _limit(name, values.get("limit"))
    if limit is False:
        return None
    return QuickCommand(
        name=name,
        argument=arguments[0] if arguments else "",
        limit=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        yes=values.get("yes") is True,
    )


def _limit(name: str, raw: str | bool | None) -> int | bool | None:
    """``--limit``'s value as typer reads it; False when typer would refuse it (or might read
    it otherwise: a sign, spaces, underscores, other digits)."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_DIGITS:
        return False
    value = int(raw)
    return False if name == "search" and value < 1 else value  # search: min=1


def run_quick(command: QuickCommand) -> None:
    """Run ``command`` as its typer command would (exits with ``SystemExit`` on failure)."""
    from cairn.cli import memory_actions as actions  # (the memory modules: only when read here)
    from cairn.cli import memory_console as console

    console.use_tenant(None)
    runs: dict[str, Callable[[], None]] = {
        "search": lambda: actions.search(
            command.argument, _or(command.limit, actions.SEARCH_LIMIT)
        ),
        "show": lambda: actions.show(command.argument),
        "forget": lambda: actions.forget(command.argument, yes=command.yes),
        "list": lambda: actions.list_newest(
            console.manager(), _or(command.limit, actions.LIST_LIMIT)
        ),
    }
    console.run(runs[command.name])


def _or(limit: int | None, default: int) -> int:
    return default if limit is None else limit
