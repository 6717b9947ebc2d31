"""``cairn -p``: one turn without a user, for scripts and CI."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Literal, TextIO, TypeAlias

from cairn.agent.loop_detection import describe_loop
from cairn.debug_log import set_process_session
from cairn.exit_codes import ExitCode
from cairn.headless.output import OutputFormat, OutputWriter
from cairn.session import context_report, usage_report
from cairn.session.commands import COMMANDS
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.session.startup import StartupError, open_runtime
from cairn.values import Value
from cairn.vocabulary.events import Notice, TurnResult
from cairn.vocabulary.terminal import escape_for_terminal

__all__ = ["HeadlessMemory", "HeadlessOptions", "run_headless"]

SAVING_NOTICE_AFTER_SECONDS = 1.0  # a memory save this slow is announced on stderr
SAVING_NOTICE = "Saving memory… (Ctrl+C skips)"
SKIPPED_NOTICE = "Memory not saved: the next session in this project extracts it."


# What becomes of the turn's Extract: "worker" (the default) hands it to a worker process and
# returns with the answer (cairn.session.extract_worker); "wait" runs it here, waited for
# (bounded) before exiting (--wait-memory); "later" leaves it pending for the project's next
# session (--no-wait-memory).
HeadlessMemory: TypeAlias = Literal["worker", "wait", "later"]


class HeadlessOptions(Value, frozen=False):
    prompt: str
    cwd: Path = field(default_factory=Path.cwd)
    output_format: OutputFormat = "text"
    max_session_turns: int | None = None
    approval_mode: str | None = None
    resume: str | None = None
    continue_latest: bool = False
    model: str | None = None
    memory: HeadlessMemory = "worker"  # the turn's Extract (see HeadlessMemory)
    partial_messages: bool = False  # stream-json: each answer as it streams, as stream events


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
        stderr.write(f"{escape_for_terminal(str(exc))}\n")
        return exc.exit_code
    for warning in opened.warnings:  # they quote settings files, which a repository wrote
        stderr.write(f"warning: {escape_for_terminal(warning)}\n")
    runtime = opened.runtime
    # One-shot use still learns: the turn's Extract runs in a worker process once the answer
    # is out, or here with a bounded wait (--wait-memory). A Dream is not waited for: it can
    # take minutes and simply runs again next time.
    memory_wait = runtime.settings.memory.headless_extract_wait_seconds
    memory = options.memory if memory_wait > 0 else "later"
    runtime.extract_in_worker = memory != "wait"
    interrupt = _Interrupt()
    _on_interrupt(asyncio.get_running_loop(), interrupt)
    try:
        code = await _run_turn(runtime, options, opened.resume, stdout, stderr, started, interrupt)
        if memory == "worker":
            await _hand_off_memory(runtime, options.model, memory_wait, stderr, interrupt)
        elif memory == "wait":
            await _save_memory(runtime, memory_wait, stderr, interrupt.skip_memory)
        return code
    finally:
        await runtime.aclose()


async def _hand_off_memory(
    runtime: Runtime, model: str | None, wait: float, stderr: TextIO, interrupt: _Interrupt
) -> None:
    """Start the worker that extracts the turn (the session stays pending until it has). One
    that cannot start leaves the extraction to this process, waited for as with --wait-memory,
    as is the indexing of memory the turn's agent saved itself."""
    from cairn.session.extract_worker import start_workers

    if runtime.memory_enabled:
        manager = runtime.memory_manager()
        for session_id in start_workers(runtime, model=model):
            manager.background.extract_here(session_id, runtime)
    await _save_memory(runtime, wait, stderr, interrupt.skip_memory)


class _Interrupt:
    """Ctrl+C (or SIGTERM): cancels the running turn; once the turn is over, skips the wait
    for memory."""

    def __init__(self) -> None:
        self.session: Session | None = None
        self.skip_memory = asyncio.Event()

    def __call__(self) -> None:
        if self.session is None or not self.session.cancel():
            self.skip_memory.set()


async def _save_memory(
    runtime: Runtime, wait: float, stderr: TextIO, skipped: asyncio.Event
) -> None:
    """Wait up to ``wait`` s for the turn's Extract; said on stderr when slow, Ctrl+C skips it.

    A skipped or unfinished extraction leaves its session pending: the next session in the
    project extracts it (``runtime.aclose`` cancels it, and the memory manager notes it).
    """
    loop = asyncio.get_running_loop()
    drain = asyncio.ensure_future(runtime.drain_memory(wait))
    notice = loop.call_later(SAVING_NOTICE_AFTER_SECONDS, _say, stderr, SAVING_NOTICE)
    skip = asyncio.ensure_future(skipped.wait())
    try:
        await asyncio.wait({drain, skip}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        notice.cancel()
        for task in (drain, skip):
            task.cancel()
        await asyncio.gather(drain, skip, return_exceptions=True)
    timed_out = drain.done() and not drain.cancelled() and drain.result() is False
    if skipped.is_set() or timed_out:
        _say(stderr, SKIPPED_NOTICE)


def _on_interrupt(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> bool:
    """Route Ctrl+C and SIGTERM to ``callback``; False where the loop cannot take signals."""
    try:
        loop.add_signal_handler(signal.SIGINT, callback)
        loop.add_signal_handler(signal.SIGTERM, callback)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - non-Unix event loops
        return False
    return True


def _say(stderr: TextIO, text: str) -> None:
    stderr.write(text + "\n")
    stderr.flush()


async def _run_turn(
    runtime: Runtime,
    options: HeadlessOptions,
    resume: str | None,
    stdout: TextIO,
    stderr: TextIO,
    started: float,
    interrupt: _Interrupt,
) -> int:
    try:
        session = (
            runtime.load_session(resume, approval_mode=options.approval_mode)
            if resume
            else runtime.new_session(approval_mode=options.approval_mode)
        )
    except (LookupError, ValueError) as exc:  # a recording gone meanwhile; a bad approval mode
        stderr.write(f"{escape_for_terminal(str(exc))}\n")
        return ExitCode.BAD_INPUT
    set_process_session(session.id)

    writer = OutputWriter(
        options.output_format,
        session_id=session.id,
        stdout=stdout,
        stderr=stderr,
        partial_messages=options.partial_messages,
    )
    writer.init(
        cwd=str(runtime.cwd),
        model=session.model,
        tools=session.registry.names(),
        mode=session.approval_mode,
        version=runtime.version,
        commands=[c.name for c in COMMANDS],
    )
    interrupt.session = session
    session.listen(writer)  # what Extract saves while `cairn -p` waits for it
    resume_note = session.task_state.resume_note  # the last turn never finished
    if resume_note is not None:  # where the task stood
        await writer(Notice("warning", resume_note, "resume"))
    api_started = time.monotonic()
    attachments = await session.attach_text(options.prompt)  # @path mentions, as in the UI
    result = await session.prompt(PromptRequest.attaching(attachments), writer)
    api_ms = int((time.monotonic() - api_started) * 1000)
    context = context_report(session).to_dict()  # what the next request would hold
    await session.close()
    code, subtype, error = _classify(result)
    writer.result(
        result,
        subtype=subtype,
        duration_ms=int((time.monotonic() - started) * 1000),
        api_duration_ms=api_ms,
        is_error=code != ExitCode.OK,
        error=error,
        usage_by_purpose=usage_report(session),  # after close: Extract's share included
        context=context,
    )
    return code


# What `-p` says last about an answer that is not complete (the session said why, in detail).
_INCOMPLETE = {
    "max_tokens": "The answer is incomplete: it was cut at its output bound.",
    "refusal": "The answer is incomplete: the endpoint's content filter withheld it.",
}


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
    if result.stop_reason in ("max_tokens", "refusal") and not result.loop_stopped:
        subtype = "error_max_tokens" if result.stop_reason == "max_tokens" else "error_refusal"
        return ExitCode.INCOMPLETE, subtype, _INCOMPLETE[result.stop_reason]
    if result.loop_stopped:
        return (
            ExitCode.ERROR,
            "error_during_execution",
            f"Loop detected: {describe_loop(result.loop_type or '')}; the turn was stopped.",
        )
    if result.blocked:
        return ExitCode.ERROR, "error_during_execution", result.text
    if result.unknown_command:  # a script's typo: answered, but the command did not run
        return ExitCode.BAD_INPUT, "error_during_execution", result.text
    return ExitCode.OK, "success", None
