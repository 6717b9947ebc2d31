"""``cairn -p``: one turn without a user, for scripts and CI."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from cairn.config.loader import NoAuthError, SettingsError, load_settings, resolve_endpoint
from cairn.debug_log import set_process_session
from cairn.headless.output import OutputFormat, OutputWriter
from cairn.session.commands import COMMANDS
from cairn.session.runtime import Runtime, SessionNotFound
from cairn.session.session import PromptRequest
from cairn.vocabulary.events import TurnResult

__all__ = [
    "EXIT_API_ERROR",
    "EXIT_BAD_INPUT",
    "EXIT_CANCELLED",
    "EXIT_CONFIG",
    "EXIT_NO_AUTH",
    "EXIT_OK",
    "EXIT_TURN_LIMIT",
    "HeadlessOptions",
    "run_headless",
]

EXIT_OK = 0
EXIT_API_ERROR = 1  # the model endpoint failed, or the turn could not finish
EXIT_NO_AUTH = 41  # no endpoint, key or model configured
EXIT_BAD_INPUT = 42  # no prompt, an unknown session, an invalid flag value
EXIT_CONFIG = 52  # a settings file cannot be used
EXIT_TURN_LIMIT = 53  # --max-session-turns (or the per-turn request cap) reached
EXIT_CANCELLED = 130  # Ctrl+C


@dataclass
class HeadlessOptions:
    prompt: str
    cwd: Path = field(default_factory=Path.cwd)
    output_format: OutputFormat = "text"
    max_session_turns: int | None = None
    approval_mode: str | None = None
    resume: str | None = None
    continue_latest: bool = False
    model: str | None = None


def run_headless(
    options: HeadlessOptions, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    return asyncio.run(_run(options, stdout or sys.stdout, stderr or sys.stderr))


async def _run(options: HeadlessOptions, stdout: TextIO, stderr: TextIO) -> int:
    started = time.monotonic()
    if not options.prompt.strip():
        stderr.write("No prompt given: pass one with -p or on stdin.\n")
        return EXIT_BAD_INPUT
    try:
        loaded = load_settings(options.cwd)
    except SettingsError as exc:
        stderr.write(f"{exc}\n")
        return EXIT_CONFIG
    for warning in loaded.warnings:
        stderr.write(f"warning: {warning}\n")
    settings = loaded.settings
    if options.max_session_turns is not None:
        settings.model.max_session_turns = options.max_session_turns
    try:
        endpoint = resolve_endpoint(settings, model=options.model)
    except NoAuthError as exc:
        stderr.write(f"{exc}\n")
        return EXIT_NO_AUTH

    from cairn import telemetry

    telemetry.configure(enabled=settings.telemetry.enabled, outfile=settings.telemetry.outfile)
    runtime = Runtime.from_endpoint(cwd=options.cwd, settings=settings, endpoint=endpoint)
    try:
        return await _run_turn(runtime, options, stdout, stderr, started)
    finally:
        await runtime.aclose()


async def _run_turn(
    runtime: Runtime, options: HeadlessOptions, stdout: TextIO, stderr: TextIO, started: float
) -> int:
    resume = options.resume
    if options.continue_latest and not resume:
        resume = runtime.latest_session_id()
        if resume is None:
            stderr.write("No earlier session to continue in this project.\n")
            return EXIT_BAD_INPUT
    try:
        session = (
            runtime.load_session(resume, approval_mode=options.approval_mode)
            if resume
            else runtime.new_session(approval_mode=options.approval_mode)
        )
    except SessionNotFound as exc:
        stderr.write(f"{exc}\n")
        return EXIT_BAD_INPUT
    except ValueError as exc:
        stderr.write(f"{exc}\n")
        return EXIT_BAD_INPUT
    set_process_session(session.id)

    writer = OutputWriter(
        options.output_format, session_id=session.id, stdout=stdout, stderr=stderr
    )
    writer.init(
        cwd=str(runtime.cwd),
        model=runtime.provider.model,
        tools=session.registry.names(),
        mode=session.approval_mode,
        version=runtime.version,
        commands=[c.name for c in COMMANDS],
    )
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, session.cancel)
        loop.add_signal_handler(signal.SIGTERM, session.cancel)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix event loops
        pass
    api_started = time.monotonic()
    result = await session.prompt(PromptRequest(text=options.prompt), writer)
    api_ms = int((time.monotonic() - api_started) * 1000)
    await _wait_for_memory(runtime, session.id)
    await session.close()
    code, subtype, error = _classify(result)
    writer.result(
        result,
        subtype=subtype,
        duration_ms=int((time.monotonic() - started) * 1000),
        api_duration_ms=api_ms,
        is_error=code != EXIT_OK,
        error=error,
    )
    return code


async def _wait_for_memory(runtime: Runtime, session_id: str) -> None:
    """One-shot use still learns: wait (bounded) for the Extract this turn scheduled.

    A Dream is not waited for: it can take minutes, and one cut short by the exit records no
    completion, so it simply runs again next time.
    """
    if not runtime.memory_enabled:
        return
    manager = runtime.memory_manager()
    await manager.drain(
        timeout=runtime.settings.memory.headless_extract_wait_seconds, extract_only=True
    )


def _classify(result: TurnResult) -> tuple[int, str, str | None]:
    if result.stop_reason == "cancelled":
        return EXIT_CANCELLED, "error_during_execution", "Cancelled."
    if result.stop_reason == "error":
        return EXIT_API_ERROR, "error_during_execution", f"API error: {result.error}"
    if result.limit in ("max_session_turns", "max_requests"):
        return (
            EXIT_TURN_LIMIT,
            "error_max_turns",
            "Reached the maximum number of session turns. Raise model.maxSessionTurns in "
            "settings.json or pass a larger --max-session-turns.",
        )
    if result.limit == "session_token_limit":
        return EXIT_API_ERROR, "error_during_execution", "Session token limit exceeded."
    if result.loop_stopped:
        return (
            EXIT_API_ERROR,
            "error_during_execution",
            f"Loop detected ({result.loop_type}); the turn was stopped.",
        )
    if result.blocked:
        return EXIT_API_ERROR, "error_during_execution", result.text
    return EXIT_OK, "success", None
