"""``cairn rewind``: list the turns of a recorded session, go back to before one, or undo.

Argument handling and output only; the work is done by :mod:`cairn.session.rewind`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cairn.exit_codes import ExitCode

__all__ = ["CLI_USAGE", "run_rewind"]

CLI_USAGE = (
    "cairn rewind N goes back to before turn N (code and conversation); add --code-only or "
    "--conversation-only for one of them; cairn rewind --undo reverses the last rewind."
)


def run_rewind(
    *,
    turn: int | None,
    list_turns: bool,
    code_only: bool,
    conversation_only: bool,
    undo: bool,
    session_id: str | None,
    cwd: Path,
) -> int:
    """Print the listing or what the rewind did; the exit code."""
    from cairn.config.loader import SettingsError, load_settings
    from cairn.recording.rewind import RewindMode
    from cairn.session.rewind import (
        RewindError,
        clamp_cursor_file,
        describe_listing,
        recorded_rewinder,
    )

    problem = _conflict(turn, list_turns, code_only, conversation_only, undo)
    if problem is not None:
        return _fail(problem, ExitCode.BAD_INPUT)
    try:
        settings = load_settings(cwd).settings
    except SettingsError as exc:
        return _fail(str(exc), ExitCode.CONFIG)
    mode: RewindMode = "code" if code_only else "conversation" if conversation_only else "both"
    try:
        rewinder = recorded_rewinder(cwd, session_id, settings)
        if turn is None and not undo:
            print(describe_listing(rewinder.listing(), usage=CLI_USAGE))
            return ExitCode.OK
        outcome = rewinder.undo() if undo else rewinder.rewind(turn or 0, mode)
    except RewindError as exc:
        return _fail(f"cannot rewind: {exc}", ExitCode.BAD_INPUT)
    if outcome.history_length is not None:
        clamp_cursor_file(rewinder.project_root, rewinder.session_id, outcome.history_length)
    print(outcome.message)
    if outcome.loaded is not None:
        print(f"Resume with: cairn --resume {rewinder.session_id}")
    return ExitCode.OK


def _conflict(
    turn: int | None, list_turns: bool, code_only: bool, conversation_only: bool, undo: bool
) -> str | None:
    if code_only and conversation_only:
        return "--code-only and --conversation-only exclude each other (the default is both)"
    if undo and turn is not None:
        return "--undo takes no turn number"
    if list_turns and (turn is not None or undo):
        return "--list shows the turns; give it no turn number and no --undo"
    if (code_only or conversation_only) and turn is None:
        return "--code-only and --conversation-only need a turn number (see cairn rewind --list)"
    if turn is not None and turn < 1:
        return "turn numbers start at 1 (see cairn rewind --list)"
    return None


def _fail(message: str, code: ExitCode) -> int:
    sys.stderr.write(f"cairn: {message}\n")
    return code
