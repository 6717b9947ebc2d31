"""Start the terminal UI: settings, endpoint and runtime first, so a bad setup fails early."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from cairn.config.loader import NoAuthError, SettingsError, load_settings, resolve_endpoint
from cairn.session.runtime import Runtime

__all__ = ["EXIT_BAD_INPUT", "EXIT_CONFIG", "EXIT_NO_AUTH", "run_interactive"]

EXIT_NO_AUTH = 41  # no endpoint, key or model configured (as in headless mode)
EXIT_BAD_INPUT = 42  # the session to resume does not exist (as in headless mode)
EXIT_CONFIG = 52  # a settings file cannot be used (as in headless mode)


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
    cwd = cwd or Path.cwd()
    try:
        loaded = load_settings(cwd)
    except SettingsError as exc:
        err.write(f"{exc}\n")
        return EXIT_CONFIG
    settings = loaded.settings
    try:
        endpoint = resolve_endpoint(settings, model=model)
    except NoAuthError as exc:
        err.write(f"{exc}\n")
        return EXIT_NO_AUTH

    from cairn import telemetry

    telemetry.configure(enabled=settings.telemetry.enabled, outfile=settings.telemetry.outfile)
    runtime = Runtime.from_endpoint(cwd=cwd, settings=settings, endpoint=endpoint)
    warnings = list(loaded.warnings)
    if continue_latest and not resume:
        resume = runtime.latest_session_id()
        if resume is None:
            warnings.append("No earlier session to continue in this project; this is a new one.")
    if resume and not runtime.session_exists(resume):
        err.write(f'No session found with ID "{resume}".\n')
        _close(runtime)
        return EXIT_BAD_INPUT

    from cairn.ui.app import CairnApp

    app = CairnApp(runtime, approval_mode=approval_mode, resume=resume, warnings=warnings)
    app.run()
    return app.return_code or 0


def _close(runtime: Runtime) -> None:
    import asyncio

    asyncio.run(runtime.aclose())
