"""Start the terminal UI: settings, endpoint and runtime first, so a bad setup fails early."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from cairn.exit_codes import ExitCode
from cairn.session.startup import StartupError, open_runtime

__all__ = ["run_interactive"]


def run_interactive(
    *,
    model: str | None,
    approval_mode: str | None,
    resume: str | None,
    continue_latest: bool,
    cwd: Path | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the Textual app until the user quits; returns the process exit code."""
    err = stderr or sys.stderr
    try:
        opened = open_runtime(
            cwd or Path.cwd(), model=model, resume=resume, continue_latest=continue_latest
        )
    except StartupError as exc:
        err.write(f"{exc}\n")
        return exc.exit_code

    from cairn.ui.app import CairnApp

    app = CairnApp(
        opened.runtime,
        approval_mode=approval_mode,
        resume=opened.resume,
        warnings=opened.warnings,
    )
    app.run()
    return app.return_code or ExitCode.OK
