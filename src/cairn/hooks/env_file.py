"""``CLAUDE_ENV_FILE``: what a ``SessionStart`` hook exports for the session's shell commands.

Each run of the ``SessionStart`` hooks (``startup``, ``resume``, ``clear``, ``compact``) starts
with an empty file; the hooks append shell lines to it (``export NODE_ENV=production``,
``export PATH="$PATH:./node_modules/.bin"``, ``source .venv/bin/activate``). After they finish,
bash sources the file once, in the session's command environment, and the variables it set,
changed or unset are what later shell commands get on top of that environment: lines are run as
a shell runs them, so ``$PATH`` expands. Shell functions and aliases do not carry over.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from cairn.debug_log import get_logger

__all__ = [
    "ENV_FILE_VARIABLE",
    "EnvironmentChange",
    "evaluate_env_file",
    "remove_env_file",
    "reset_env_file",
]

ENV_FILE_VARIABLE = "CLAUDE_ENV_FILE"
EVALUATE_TIMEOUT_SECONDS = 10.0  # for sourcing the file once (it may run what the hooks wrote)
# Variables bash sets by itself: never read as a change the file made.
_BASH_OWN = frozenset({"_", "PWD", "OLDPWD", "SHLVL", "BASH_EXECUTION_STRING"})
_SEPARATOR = "\x01CLAUDE_ENV_FILE\x01"  # between the environment before and after
# Prints the environment, NUL-separated, before and after sourcing the file quietly: the
# difference is the file's, whatever the process running bash added (Python's LC_CTYPE).
_EVALUATE = (
    f"env -0; printf '\\0%s\\0' '{_SEPARATOR}'; "
    f'set -a; . "${ENV_FILE_VARIABLE}" >/dev/null 2>&1 </dev/null; env -0'
)

EnvironmentChange = dict[str, str | None]  # a value of None: the variable was unset

_log = get_logger("HOOKS")


def reset_env_file(path: Path) -> None:
    """An empty file at ``path`` (owner-only), for the hooks about to run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.close(fd)


async def evaluate_env_file(
    path: Path, environ: Mapping[str, str], cwd: Path
) -> tuple[EnvironmentChange, str | None]:
    """What sourcing ``path`` in ``environ`` changes, and a warning when it could not be read
    (an empty change then)."""
    from cairn.hooks.process import run_command  # only when a hook wrote the file

    try:
        if path.stat().st_size == 0:
            return {}, None
    except OSError:
        return {}, None
    base = {**environ, ENV_FILE_VARIABLE: str(path)}
    result = await run_command(
        _EVALUATE, stdin=b"", cwd=cwd, env=base, timeout=EVALUATE_TIMEOUT_SECONDS
    )
    if result.exit_code != 0 or result.truncated:
        why = "timed out" if result.timed_out else result.error or f"exit {result.exit_code}"
        return {}, f"{ENV_FILE_VARIABLE} written by SessionStart hooks could not be read ({why})"
    entries = result.stdout.split("\0")
    if _SEPARATOR not in entries:
        return {}, f"{ENV_FILE_VARIABLE} written by SessionStart hooks could not be read"
    cut = entries.index(_SEPARATOR)
    before, after = _variables(entries[:cut]), _variables(entries[cut + 1 :])
    change: EnvironmentChange = {
        name: value
        for name, value in after.items()
        if name not in _BASH_OWN and name != ENV_FILE_VARIABLE and before.get(name) != value
    }
    change.update({name: None for name in before if name not in after and name not in _BASH_OWN})
    _log.debug(f"{ENV_FILE_VARIABLE}: {len(change)} variables for shell commands")
    return change, None


def remove_env_file(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _variables(entries: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if sep and name:
            found[name] = value
    return found
