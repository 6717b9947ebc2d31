"""Warming a long-running front end up: what its sessions' first requests would load on use.

The start paths import what they need and no more (``cairn -p`` never loads ``/rewind``). A
daemon, once it answers, serves every kind of request: :func:`warm_up` loads, in a worker
thread right after it is ready, what the first session, its first turn, its rewind list and a
session listing would otherwise load while a client waits (``tests/e2e/test_daemon_warm.py``
checks that the first requests then import nothing).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger

if TYPE_CHECKING:
    from cairn.session.runtime import Runtime

__all__ = ["SESSION_MODULES", "warm_up"]

# Loaded on first use by a session's parts: creating one (recorder, checkpoints, commands and
# skills, hooks), listing and resuming recordings, /rewind; and web_fetch's HTTP stack (httpx
# loads httpcore and anyio on its first request; the provider's own connections need neither).
SESSION_MODULES = (
    "cairn.recording.recorder",
    "cairn.recording.listing",
    "cairn.recording.reader",
    "cairn.recording.rewind",
    "cairn.recording.checkpoints",
    "cairn.session.checkpoints",
    "cairn.session.extensions",
    "cairn.session.hook_events",
    "cairn.session.rewind",
    "cairn.session.rewind_requests",
    "cairn.hooks.runner",
    "cairn.hooks.env_file",
    "cairn.tools.agent",
    "cairn.tools.environment",
    "cairn.tools.web_fetch",
    "cairn.extensions.skill_tool",
    "cairn.extensions.subagents",
    "filelock",
    "httpcore",
    "httpx_sse",
    "anyio._backends._asyncio",
)

_log = get_logger("SESSION")


def warm_up(runtime: Runtime) -> None:
    """Load what the runtime's first requests would (blocking: run it in a worker thread).
    Best effort: a failure is logged and the request that needs the module loads it."""
    from cairn.tools.registry import default_registry

    try:
        default_registry()  # every built-in tool's module
        runtime.extensions()  # the project's commands, skills and agents, read once
        _ = runtime.sessions  # where its sessions are recorded (the store's backend)
        for name in SESSION_MODULES:
            importlib.import_module(name)
    except Exception as exc:  # a warm-up must never stop a daemon that answers already
        _log.warning(f"warming up failed: {exc!r}")
