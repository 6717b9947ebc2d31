"""The exit codes of every ``cairn`` command, defined once.

``cairn -p``, the terminal UI, ``cairn --acp``, ``cairn serve`` and ``cairn memory`` report the
same failure with the same code, so a script can tell a missing endpoint from a broken settings
file whichever front end it started. docs/configuration.md lists them for users.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode"]


class ExitCode(IntEnum):
    """A process exit status (an ``int``: pass it to ``sys.exit`` or ``typer.Exit`` as is)."""

    OK = 0
    ERROR = 1  # the model endpoint or the server failed, or the work could not be done
    NO_AUTH = 41  # no model endpoint, key or model is configured
    BAD_INPUT = 42  # no prompt, an unknown session, an invalid or unsafe flag value
    CONFIG = 52  # a settings file cannot be used
    TURN_LIMIT = 53  # --max-session-turns (or the per-turn request cap) was reached
    INCOMPLETE = 54  # the answer was cut at its output bound or withheld by a content filter
    CANCELLED = 130  # Ctrl+C or SIGTERM ended the turn (128 + SIGINT, as shells report it)
