"""The interactive terminal UI (Textual). Importing this package does not import Textual."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

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
    """Open the terminal UI on one session; the exit code (41: no endpoint, 52: bad settings)."""
    from cairn.ui.launch import run_interactive as _run

    return _run(
        model=model,
        approval_mode=approval_mode,
        resume=resume,
        continue_latest=continue_latest,
        cwd=cwd,
        stderr=stderr,
    )
