"""Start the terminal UI: settings, endpoint and runtime first, so a bad setup fails early."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from cairn.exit_codes import ExitCode
from cairn.session.startup import StartupError, load_startup, open_runtime

__all__ = ["run_interactive"]


def run_interactive(
    *,
    model: str | None,
    approval_mode: str | None,
    resume: str | None,
    continue_latest: bool,
    initial_prompt: str | None = None,
    cwd: Path | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the Textual app until the user quits; returns the process exit code.

    ``initial_prompt`` (``cairn "fix the bug"``) is sent as the first prompt once the UI is up.
    """
    err = stderr or sys.stderr
    folder = cwd or Path.cwd()
    try:
        if _ask_to_trust(folder, model, err) == "quit":
            return ExitCode.OK
    except StartupError as exc:
        err.write(f"{exc}\n")
        return exc.exit_code
    try:
        opened = open_runtime(folder, model=model, resume=resume, continue_latest=continue_latest)
    except StartupError as exc:
        err.write(f"{exc}\n")
        return exc.exit_code

    from cairn.ui.app import CairnApp

    app = CairnApp(
        opened.runtime,
        approval_mode=approval_mode,
        resume=opened.resume,
        warnings=opened.warnings,
        initial_prompt=initial_prompt,
    )
    app.run()
    if app.resume_hint and app.return_code in (None, ExitCode.OK):
        sys.stdout.write(f"{app.resume_hint}\n")
        sys.stdout.flush()
    return app.return_code or ExitCode.OK


def _ask_to_trust(folder: Path, model: str | None, err: TextIO) -> str | None:
    """The trust question (:mod:`cairn.ui.trust`), once a bad setup has had its chance to fail
    (a broken settings file or no endpoint exits before any question)."""
    from cairn.config.trust import TrustFileError, project_trust

    trust = project_trust(folder)
    if trust.trusted or trust.declined:
        return None
    load_startup(folder, model=model, configure_telemetry=False)
    from cairn.ui.trust import ask_to_trust

    try:
        return ask_to_trust(trust)
    except TrustFileError as exc:  # the answer could not be kept: start without the settings
        err.write(f"{exc}\n")
        return None
