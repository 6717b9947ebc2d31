"""``cairn trust``: trust a folder's project commands, list the trusted folders, or revoke.

Argument handling and output only; the work is done by :mod:`cairn.config.trust`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cairn.exit_codes import ExitCode
from cairn.vocabulary.terminal import escape_for_terminal

__all__ = ["run_trust"]


def run_trust(*, path: Path | None, list_folders: bool, revoke: bool, cwd: Path) -> int:
    """Print what was done; the exit code."""
    from cairn.config.trust import (
        TrustFileError,
        forget_folder,
        project_trust,
        trust_folder,
        trusted_folders,
    )

    if list_folders and (revoke or path is not None):
        return _fail("--list takes no folder and no --revoke")
    if list_folders:
        return _list(trusted_folders())
    folder = (path or cwd).expanduser()
    if not folder.is_dir():
        return _fail(f"{_shown(folder)} is not a folder")
    try:
        if revoke:
            removed = forget_folder(folder)
            trust = project_trust(folder)
            shown = _shown(trust.folder)
            print(
                f"{shown}: its trust is revoked."
                if removed
                else f"{shown} was not trusted by cairn trust."
            )
            return ExitCode.OK
        trust = trust_folder(folder)
    except TrustFileError as exc:
        return _fail(str(exc), ExitCode.ERROR)
    if not trust.commands:
        print(f"{_shown(trust.folder)} is trusted (its project settings define no commands yet).")
    else:
        print(f"{_shown(trust.folder)} is trusted. cairn will use these project settings:")
        for command in trust.commands:
            print(f"  {command.describe()}")
        print("If they change, cairn asks again.")
    return ExitCode.OK


def _list(folders: dict[str, dict[str, object]]) -> int:
    if not folders:
        print("No folder has been trusted or declined with cairn trust or the terminal UI.")
        return ExitCode.OK
    from cairn.config.trust import fingerprint, project_commands

    for folder, record in sorted(folders.items()):
        decision = "trusted" if record.get("decision") == "trust" else "declined"
        if Path(folder).is_dir() and record.get("fingerprint") != fingerprint(
            project_commands(Path(folder))
        ):
            decision = "changed"  # its commands changed since: cairn asks again
        when = record.get("decidedAt", "unknown date")
        print(f"{decision:>8}  {_shown(folder)}  ({_shown(when)})")
    return ExitCode.OK


def _shown(text: object) -> str:
    """A folder or value from outside cairn, with its control characters and bidi overrides
    escaped (a repository can be cloned into a folder of any name)."""
    return escape_for_terminal(str(text), keep_newlines=False)


def _fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> int:
    sys.stderr.write(f"cairn: {message}\n")
    return code
