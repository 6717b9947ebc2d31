"""The environment of the commands cairn starts (shell commands, hooks): without cairn's secrets.

cairn's own credentials — the provider's API key, the daemon's token, the memory database's
address and password — are in cairn's environment so that cairn can use them, not so that every
command the model runs can print them (``env``, ``echo $OPENAI_API_KEY``) into a conversation
that goes to the provider (or, from a daemon tenant, reach every tenant's memory). They are left
out of the commands' environment: by name (:data:`SECRET_VARIABLES`), and by value (any variable
holding a key in use, however it is named, e.g. one that ``security.auth.apiKey: "$MY_KEY"``
reads; the web search key; each ``model.available`` entry's ``envKey``: :func:`keys_in_use`;
a daemon's token and database address given by flag, ``cairn serve --token "$X"``).
``tools.passSecretsToShell`` names the variables a user wants passed anyway.

A command that runs without anyone approving it must also run the programs it names from the
system, not from the folder it works in: :func:`outside_path` drops the ``PATH`` entries that
are relative or empty (the current folder) or inside the workspace, where a repository could
put its own ``ls`` or ``git``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cairn.config.settings import Settings

__all__ = [
    "MIN_SECRET_CHARS",
    "SECRET_VARIABLES",
    "command_environment",
    "keys_in_use",
    "outside_path",
    "settings_command_environment",
]

SECRET_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CAIRN_SERVER_TOKEN",
    "CAIRN_MEMORY_DSN",  # the memory database, with its password: every tenant's memory
    "CAIRN_DATABASE_URL",  # the sessions database of `cairn serve --database`: every tenant's
)
MIN_SECRET_CHARS = 8  # shorter values are not searched for (they would match by accident)


def command_environment(
    environ: Mapping[str, str] | None = None,
    *,
    secrets: Iterable[str] = (),
    keep: Iterable[str] = (),
) -> dict[str, str]:
    """``environ`` (default: cairn's own) without cairn's secrets.

    Removed: the :data:`SECRET_VARIABLES`, and every variable whose value contains one of
    ``secrets`` (the values in use, such as the endpoint's key). Variables named in ``keep``
    stay.
    """
    kept = frozenset(keep)
    values = [s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_CHARS]
    env = dict(os.environ if environ is None else environ)
    for name in list(env):
        if name in kept:
            continue
        if name in SECRET_VARIABLES or any(secret in env[name] for secret in values):
            del env[name]
    return env


def keys_in_use(
    settings: Settings, main_key: str | None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The keys cairn holds for these settings: the main endpoint's (``main_key``, or else
    ``security.auth.apiKey``), the web search provider's, and each ``model.available`` entry's
    ``envKey`` value."""
    env = os.environ if environ is None else environ
    keys = [main_key or settings.security.auth.api_key or "", settings.tools.web_search.key(env)]
    if isinstance(settings.model.available, list):
        keys += [
            env.get(entry.env_key, "")
            for entry in settings.model.available
            if not isinstance(entry, str) and entry.env_key
        ]
    return [key for key in keys if key]


def settings_command_environment(
    settings: Settings, main_key: str | None, *, secrets: Iterable[str] = ()
) -> dict[str, str]:
    """cairn's environment without the secrets of :func:`keys_in_use`, ``secrets`` (values
    cairn was given otherwise: a daemon's token) and :data:`SECRET_VARIABLES`, but with those
    ``tools.passSecretsToShell`` names."""
    return command_environment(
        secrets=[*keys_in_use(settings, main_key), *secrets],
        keep=settings.tools.pass_secrets_to_shell,
    )


def outside_path(path: str, folders: Iterable[Path]) -> str:
    """``path`` (a ``PATH`` value) without entries that are relative, empty or inside
    ``folders``."""
    roots = [Path(os.path.realpath(f)) for f in folders]
    kept: list[str] = []
    for entry in path.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = Path(os.path.realpath(entry))
        if any(real == root or root in real.parents for root in roots):
            continue
        kept.append(entry)
    return os.pathsep.join(kept)
