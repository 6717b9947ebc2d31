"""``cairn serve``: the HTTP daemon that serves cairn sessions to editors, scripts and the SDK.

Import-light on purpose: Starlette and uvicorn load only when :func:`run_daemon` runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["run_daemon"]


def run_daemon(
    *,
    host: str,
    port: int,
    token: str | None,
    allow_origins: Sequence[str],
    max_sessions: int,
    workspace: Path,
) -> int:
    """Serve until SIGINT or SIGTERM; returns the process exit code."""
    from cairn.daemon.server import run_daemon as _run

    return _run(
        host=host,
        port=port,
        token=token,
        allow_origins=allow_origins,
        max_sessions=max_sessions,
        workspace=workspace,
    )
