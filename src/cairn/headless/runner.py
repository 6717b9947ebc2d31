"""``cairn -p``: one turn without a user, for scripts and CI."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from cairn.debug_log import set_process_session
from cairn.exit_codes import ExitCode
from cairn.headless.output import OutputFormat, OutputWriter
from cairn.session.commands import COMMANDS
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest
from cairn.session.startup import StartupError, open_runtime
from cairn.vocabulary.events import TurnResult

__all__ = ["HeadlessOptions", "run_headless"]


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
        return ExitCode.BAD_INPUT
    try:
        opened = open_runtime(
            options.cwd,
            model=options.model,
            max_session_turns=options.max_session_turns,
            resume=options.resume,
            continue_latest=options.continue_latest,
        )
    except StartupError as exc:
        stderr.write(f"{exc}\n")
        return exc.exit_code
    for warning in opened.warnings:
        stderr.write(f"warning: {warning}\n")
    runtime = opened.runtime
    # One-shot use still learns: the Extract this turn scheduled gets a bounded wait. A Dream
    # is not waited for: it can take minutes and simply runs again next time.
    memory_wait = runtime.settings.memory.headless_extract_wait_seconds
    try:
        return await _run_turn(runtime, options, opened.resume, stdout, stderr, started)
    finally:
        await runtime.aclose(memory_wait=memory_wait)


async def _run_turn(
    runtime: Runtime,
    options: HeadlessOptions,
    resume: str | None,
    stdout: TextIO,
    stderr: TextIO,
    started: float,
) -> int:
    try:
        session = (
            runtime.load_session(resume, approval_mode=options.approval_mode)
            if resume
            else runtime.new_session(approval_mode=options.approval_mode)
        )
    except (LookupError, ValueError) as exc:  # a recording gone meanwhile; a bad approval mode
        stderr.write(f"{exc}\n")
        return ExitCode.BAD_INPUT
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
    attachments = await session.attach_text(options.prompt)  # @path mentions, as in the UI
    result = await session.prompt(PromptRequest.attaching(attachments), writer)
    api_ms = int((time.monotonic() - api_started) * 1000)
    await session.close()
    code, subtype, error = _classify(result)
    writer.result(
        result,
        subtype=subtype,
        duration_ms=int((time.monotonic() - started) * 1000),
        api_duration_ms=api_ms,
        is_error=code != ExitCode.OK,
        error=error,
    )
    return code


def _classify(result: TurnResult) -> tuple[int, str, str | None]:
    if result.stop_reason == "cancelled":
        return ExitCode.CANCELLED, "error_during_execution", "Cancelled."
    if result.stop_reason == "error":
        return ExitCode.ERROR, "error_during_execution", f"API error: {result.error}"
    if result.limit in ("max_session_turns", "max_requests"):
        return (
            ExitCode.TURN_LIMIT,
            "error_max_turns",
            "Reached the maximum number of session turns. Raise model.maxSessionTurns in "
            "settings.json or pass a larger --max-session-turns.",
        )
    if result.limit == "session_token_limit":
        return ExitCode.ERROR, "error_during_execution", "Session token limit exceeded."
    if result.loop_stopped:
        return (
            ExitCode.ERROR,
            "error_during_execution",
            f"Loop detected ({result.loop_type}); the turn was stopped.",
        )
    if result.blocked:
        return ExitCode.ERROR, "error_during_execution", result.text
    return ExitCode.OK, "success", None
