"""``cairn --acp``: the process around the ACP agent (stdio, logging, settings, shutdown).

The cyclic garbage collector is kept off two walks that find nothing: while the ACP SDK is
imported (its ~270 pydantic classes would trigger about sixty collections, each walking what
the import built so far) and at exit (the interpreter's teardown walks every object a few
times, ~0.2 s of CPU after the client has left). The start-up's paused collector
(:mod:`cairn._startup`) lasts through the SDK's import, and what exists then, which lives as long
as the process, is frozen out of the collector (``startup_done``); everything is frozen again once
the agent has shut down: by then every session, file and connection is closed, and the atexit
handlers still run. benchmarks/README.md (issue #25) has the figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO, cast

from cairn._startup import pause_collection, startup_done
from cairn.debug_log import get_logger, mirror_warnings
from cairn.exit_codes import ExitCode
from cairn.session.startup import StartupError, load_startup

if TYPE_CHECKING:
    from cairn.acp.agent import AgentOptions

__all__ = ["SHUTDOWN_MEMORY_WAIT_SECONDS", "run_acp_agent", "serve"]

SHUTDOWN_MEMORY_WAIT_SECONDS = 10.0  # memory work (Extract) may finish after the client leaves


def run_acp_agent(*, model: str | None, approval_mode: str | None) -> int:
    """Serve ACP on stdin/stdout until the client closes stdin; returns the exit code."""
    from cairn.acp.transport import claim_stdout

    protocol_out = claim_stdout()
    _route_logging(sys.stderr)
    mirror_warnings(sys.stderr, "cairn --acp: ")  # cairn's own warnings, as docs/acp.md says
    cwd = Path.cwd()
    try:  # no endpoint is no reason to stop: session/new explains what to set
        startup = load_startup(cwd, model=model, require_endpoint=False)
    except StartupError as exc:
        sys.stderr.write(f"cairn --acp: {exc}\n")
        return exc.exit_code
    for warning in startup.warnings:
        sys.stderr.write(f"cairn --acp: warning: {warning}\n")
    if startup.auth_error is not None:
        sys.stderr.write(f"cairn --acp: {startup.auth_error}\n")

    pause_collection()  # a no-op when the `cairn` program paused it already
    from cairn.acp._sdk import import_sdk

    import_sdk()
    from cairn.acp.agent import AgentOptions

    startup_done()  # the start-up and the SDK frozen, the collector as usual (cairn._startup)

    options = AgentOptions(
        cwd=cwd,
        settings=startup.settings,
        endpoint=startup.endpoint,
        auth_error=startup.auth_error,
        model=model,
        approval_mode=approval_mode,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(options, sys.stdin.buffer, protocol_out, stop_signals=True))
    gc.freeze()  # the teardown at exit walks none of it (module docstring)
    return ExitCode.OK


async def serve(
    options: AgentOptions,
    stdin: BinaryIO,
    stdout: BinaryIO,
    *,
    stop_signals: bool = False,
    memory_wait: float = SHUTDOWN_MEMORY_WAIT_SECONDS,
) -> None:
    """Serve one client on ``stdin``/``stdout`` until it closes ``stdin`` (or a stop signal)."""
    from acp.agent.connection import AgentSideConnection
    from acp.interfaces import Agent

    from cairn.acp.agent import CairnAgent
    from cairn.acp.requests import OutgoingRequests
    from cairn.acp.transport import open_stdio_transport

    transport = OutgoingRequests(await open_stdio_transport(stdin, stdout))
    agent = CairnAgent(options, requests=transport)
    # CairnAgent implements the methods cairn supports; the SDK answers the rest with
    # method-not-found, so it is an Agent in every way the SDK relies on.
    # session/resume and session/close are stable in the protocol, still "unstable" in SDK 0.12.
    conn = AgentSideConnection(
        cast(Agent, agent), transport, listening=False, use_unstable_protocol=True
    )
    listening = asyncio.ensure_future(conn.listen())
    if stop_signals:
        _stop_on_signals(listening)
    try:
        await listening
    except asyncio.CancelledError:
        if not listening.cancelled():
            raise
    finally:
        await agent.aclose(memory_wait=memory_wait)
        await conn.close()


def _stop_on_signals(listening: asyncio.Future[None]) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, listening.cancel)


class _StderrFormatter(logging.Formatter):
    """One line per record: a stack trace never reaches the client's log pane."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"cairn --acp: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f" ({type(error).__name__}: {error})"
        return text


class _DebugLogHandler(logging.Handler):
    """Library log records (the SDK's, asyncio's) in cairn's debug log, tracebacks included."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            logger = get_logger(record.name.upper())
            if record.levelno >= logging.ERROR:
                logger.error(message, mirror=False)  # the stderr handler shows it already
            elif record.levelno >= logging.WARNING:
                logger.warning(message, mirror=False)
            else:
                logger.info(message)
        except Exception:  # logging must never raise
            self.handleError(record)


def _route_logging(stderr: TextIO) -> None:
    root = logging.getLogger()
    root.handlers.clear()
    to_stderr = logging.StreamHandler(stderr)
    to_stderr.setLevel(logging.WARNING)
    to_stderr.setFormatter(_StderrFormatter())
    root.addHandler(to_stderr)
    root.addHandler(_DebugLogHandler(logging.INFO))
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
