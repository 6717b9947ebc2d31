"""``run_shell_command``: ``bash -c`` in its own process group, with a time limit.

The command runs in the workspace (or a folder inside it) with stdin closed and stdout and
stderr interleaved in one pipe. A timeout, an abort or a cancelled task kills the whole process
group (SIGTERM, then SIGKILL), so children die with the shell, and what it started in a session
of its own (``setsid``, a double fork) too: outside the sandbox (whose process namespace ends
with the command) the command runs under a subreaper (:mod:`cairn.hooks.reaper`, ``shell``
mode) that keeps them in its process tree. Background processes that outlive a shell that
ends by itself (``server &``) are left running; their output is no longer read.

When the session has a :class:`~cairn.tools.base.CommandRunner` (an editor's terminals, over
ACP), the command runs there instead, so people watch it live; the model gets its output
clipped the same way, and a timeout, an abort or a cancelled task kills it there.

Read-only commands (:mod:`cairn.tools.shell_readonly`) need no approval. The environment never
carries cairn's own secrets (:mod:`cairn.tools.environment`), and a command that runs without
anyone approving it runs git with the repository's program-running config switched off
(:func:`cairn.tools.shell_git.neutral_git_env`).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from cairn.tools.arguments import optional_number, optional_str, require_str
from cairn.tools.base import ConfirmationKind, ToolContext, ToolError, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool
from cairn.tools.files import display_path
from cairn.tools.schema import object_schema, string_property
from cairn.values import Value
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.tools.base import CommandRunner
    from cairn.tools.shell_readonly import ShellScope

__all__ = ["MAX_SHELL_OUTPUT_CHARS", "MAX_SHELL_TIMEOUT_SECONDS", "ShellTool"]

MAX_SHELL_TIMEOUT_SECONDS = 600.0  # the longest time limit a call may ask for
MAX_SHELL_OUTPUT_CHARS = 30_000  # output kept (head and tail halves) of one command
KILL_GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL of the process group
POST_EXIT_DRAIN_SECONDS = 0.5  # output still read after the shell exits (from its children)
RUNNER_GRACE_SECONDS = 5.0  # an editor's answer to kill/output/release, before giving up
TERMINAL_OUTPUT_BYTES = 1 << 20  # output an editor's terminal keeps for the model (its tail)
DROPPED_HEAD_NOTE = "[The beginning of the output was dropped by the terminal.]\n"

_PARAMETERS = object_schema(
    {
        "command": string_property("The bash command to run."),
        "description": string_property(
            "A short description of what the command does, shown to the user."
        ),
        "directory": string_property(
            "Folder to run in, relative to the workspace (default: the workspace root)."
        ),
        "timeout": {
            "type": "number",
            "description": "Time limit in seconds (default from settings, at most "
            f"{MAX_SHELL_TIMEOUT_SECONDS:g}).",
        },
    },
    required=["command"],
)

_Ending = Literal["exited", "timeout", "aborted"]
_T = TypeVar("_T")


class ShellTool(BuiltinTool):
    name = ToolName.SHELL
    description = (
        "Run a bash command in the workspace and return its combined stdout and stderr and "
        "its exit code. Stdin is closed, so interactive commands fail; pass flags such as "
        "--yes or --no-pager instead. Long output keeps its beginning and end."
    )
    parameters = _PARAMETERS
    kind = ToolKind.EXECUTE

    def title(self, args: Mapping[str, Any]) -> str:
        command = str(args.get("command", "")).strip()
        first_line, _, rest = command.partition("\n")
        text = first_line + (" ..." if rest else "")
        description = args.get("description")
        return f"{text} ({description})" if isinstance(description, str) and description else text

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        from cairn.tools.shell_readonly import is_read_only_command  # ~6 ms to import: on use

        command = args.get("command")
        if isinstance(command, str) and is_read_only_command(command, shell_scope(args, ctx)):
            return None
        return "exec"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        command = require_str(args, "command")
        if "\x00" in command:
            raise ToolError("The command contains a NUL byte, which cannot be passed to bash.")
        cwd = _working_directory(optional_str(args, "directory"), ctx)
        timeout = _time_limit(optional_number(args, "timeout"), ctx)
        run = await _run_in_group(command, cwd, timeout, ctx)
        return _result(run, timeout)


def shell_scope(args: Mapping[str, Any], ctx: ToolContext) -> ShellScope:
    """Where this call's command runs and what it may read without asking."""
    from cairn.tools.shell_readonly import ShellScope

    try:
        cwd = _working_directory(optional_str(args, "directory"), ctx)
    except ToolError:
        cwd = ctx.workspace
    return ShellScope.of(cwd, ctx.roots(), lambda path: ctx.denial(path) is not None)


def _working_directory(directory: str | None, ctx: ToolContext) -> Path:
    if directory is None:
        return ctx.workspace
    path = ctx.resolve(directory)
    if not path.is_dir():
        raise ToolError(f"directory {display_path(path, ctx.workspace)} is not an existing folder.")
    return path


def _time_limit(requested: float | None, ctx: ToolContext) -> float:
    if requested is None:
        return ctx.shell_timeout
    if requested <= 0:
        raise ToolError("Invalid parameters: `timeout` must be a positive number of seconds.")
    return min(requested, MAX_SHELL_TIMEOUT_SECONDS)


class _HeadTail:
    """Decoded output, keeping the first and last halves of ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head: list[str] = []
        self._head_size = 0
        self._tail = ""
        self.omitted = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final=final)
        room = self._head_limit - self._head_size
        if room > 0:
            self._head.append(text[:room])
            self._head_size += min(room, len(text))
            text = text[room:]
        if text:
            self._tail += text
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                self.omitted += excess
                self._tail = self._tail[excess:]

    def text(self) -> str:
        self.feed(b"", final=True)
        head = "".join(self._head)
        if not self.omitted:
            return head + self._tail
        note = f"\n\n[... {self.omitted} characters of output omitted ...]\n\n"
        return head + note + self._tail


class _ShellProtocol(asyncio.SubprocessProtocol):
    def __init__(self, output: _HeadTail, loop: asyncio.AbstractEventLoop) -> None:
        self.output = output
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.output.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.output_closed.done():
            self.output_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


class _Run(Value):
    ending: _Ending
    returncode: int | None
    output: str
    abort_reason: str | None = None
    signal: str | None = None  # the signal that ended it, by name (an editor's terminal)


async def _run_in_group(command: str, cwd: Path, timeout: float, ctx: ToolContext) -> _Run:
    from cairn.tools.sandbox import SETUP_ATTEMPTS, sandboxed, setup_status_reported

    argv = ["bash", "-c", command]
    if ctx.sandbox is not None and ctx.commands is None and setup_status_reported():
        for _ in range(SETUP_ATTEMPTS):  # the host changed before bwrap's mounts: again
            run, started = await _run_sandboxed(argv, cwd, timeout, ctx)
            if started:
                break
        return run
    async with sandboxed(argv, ctx.sandbox, cwd=cwd) as fenced:
        if ctx.commands is not None:  # the editor's terminal runs the same, fenced, command
            return await _run_with(ctx.commands, fenced, cwd, timeout, ctx)
        return await _run_argv(fenced, cwd, timeout, ctx)


async def _run_sandboxed(
    argv: list[str], cwd: Path, timeout: float, ctx: ToolContext
) -> tuple[_Run, bool]:
    """One run under bwrap, and whether the command started (bwrap's setup did not fail)."""
    from cairn.tools.sandbox import sandboxed, setup_failed

    read_end, write_end = os.pipe()
    try:
        os.set_blocking(read_end, False)
        async with sandboxed(argv, ctx.sandbox, cwd=cwd, status_fd=write_end) as fenced:
            run = await _run_argv(fenced, cwd, timeout, ctx, pass_fds=(write_end,))
        status = b""  # written before bwrap exits; a read never waits
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(read_end, 4096):
                status += chunk
    finally:
        os.close(read_end)
        os.close(write_end)
    return run, not (run.ending == "exited" and setup_failed(status, run.returncode))


async def _run_with(
    runner: CommandRunner, argv: list[str], cwd: Path, timeout: float, ctx: ToolContext
) -> _Run:
    """Run in the runner's terminal: shown live with the call, killed on timeout or abort."""
    from cairn.vocabulary.events import ToolCallUpdate

    running = await runner.start(argv, cwd=cwd, env=_environment(ctx))
    try:
        shown_in = running.terminal_id
        if shown_in is not None and ctx.events is not None and ctx.call_id:
            await ctx.events(ToolCallUpdate(ctx.call_id, "in_progress", terminal_id=shown_in))
        exit_task = asyncio.ensure_future(running.wait())
        try:
            ending = await _wait(exit_task, timeout, ctx)
            if ending != "exited":
                await _bounded(running.kill())
            done = await _bounded(asyncio.shield(exit_task))
        finally:
            exit_task.cancel()
        text, truncated = await _bounded(running.output()) or ("", False)
    except asyncio.CancelledError:
        await asyncio.shield(_bounded(running.kill()))
        raise
    finally:
        await asyncio.shield(_bounded(running.release()))
    clipped = _HeadTail(MAX_SHELL_OUTPUT_CHARS)
    clipped.feed(text.encode("utf-8", "replace"), final=True)
    shown = (DROPPED_HEAD_NOTE if truncated else "") + clipped.text()
    code, signal_name = (done.returncode, done.signal) if done is not None else (None, None)
    return _Run(ending, code, shown, ctx.abort.reason, signal_name)


async def _bounded(awaitable: Awaitable[_T]) -> _T | None:
    """An editor's answer, or ``None`` when it gives none in time (the turn still ends)."""
    try:
        return await asyncio.wait_for(awaitable, RUNNER_GRACE_SECONDS)
    except (TimeoutError, ToolError, ConnectionError):
        return None


async def _run_argv(
    argv: list[str], cwd: Path, timeout: float, ctx: ToolContext, pass_fds: tuple[int, ...] = ()
) -> _Run:
    from cairn.hooks.process import reaped, spawn_group

    if ctx.sandbox is None:
        argv = reaped(argv, "shell")
    loop = asyncio.get_running_loop()
    output = _HeadTail(MAX_SHELL_OUTPUT_CHARS)
    try:
        transport, protocol = await spawn_group(
            lambda: _ShellProtocol(output, loop),
            argv,
            cwd=cwd,
            env=_environment(ctx),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            pass_fds=pass_fds,
        )
    except OSError as exc:
        raise ToolError(f"Could not start bash: {exc.strerror or exc}") from None
    try:
        ending = await _wait(protocol.exited, timeout, ctx)
        if ending != "exited":
            await _kill_group(transport.get_pid(), protocol)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.output_closed), POST_EXIT_DRAIN_SECONDS)
        return _Run(ending, transport.get_returncode(), output.text(), ctx.abort.reason)
    except asyncio.CancelledError:
        await asyncio.shield(_kill_group(transport.get_pid(), protocol))
        raise
    finally:
        transport.close()


async def _wait(exited: asyncio.Future[Any], timeout: float, ctx: ToolContext) -> _Ending:
    aborted = asyncio.get_running_loop().create_future()

    def on_abort(_reason: str | None) -> None:
        if not aborted.done():
            aborted.set_result(None)

    remove = ctx.abort.add_listener(on_abort)
    try:
        done, _ = await asyncio.wait(
            [exited, aborted], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        remove()
        aborted.cancel()
    if exited in done:
        return "exited"
    return "aborted" if ctx.abort.aborted else "timeout"


async def _kill_group(pid: int, protocol: _ShellProtocol) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left of it: of the group and,
    under the subreaper, every process below it (which it kills itself when the command ends
    after the SIGTERM)."""
    from cairn.hooks.reaper import kill_tree

    _signal_group(pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(protocol.exited), KILL_GRACE_SECONDS)
    if not protocol.exited.done():
        kill_tree(pid)
    _signal_group(pid, signal.SIGKILL)
    await protocol.exited


def _signal_group(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _environment(ctx: ToolContext) -> dict[str, str]:
    """The command's environment: cairn's without its secrets; for a command nobody approved,
    git neutral and programs found only outside the workspace."""
    from cairn.tools.environment import command_environment, outside_path

    env = dict(ctx.environment) if ctx.environment is not None else command_environment()
    env["CAIRN"] = "1"  # lets scripts tell they run under the agent
    env.setdefault("PAGER", "cat")
    env.setdefault("GIT_PAGER", "cat")
    if ctx.approval == "unasked":
        from cairn.tools.shell_git import neutral_git_env

        env = neutral_git_env(env)
        env["PATH"] = outside_path(env.get("PATH", ""), [ctx.workspace, *ctx.roots()])
    return env


def _result(run: _Run, timeout: float) -> ToolResult:
    output = run.output if run.output.strip() else "(no output)"
    if run.ending == "timeout":
        return ToolResult(
            error=f"Command timed out after {timeout:g} s; its process group was killed.\n"
            f"Output before the timeout:\n{output}"
        )
    if run.ending == "aborted":
        reason = f" ({run.abort_reason})" if run.abort_reason else ""
        return ToolResult(
            error=f"Command was cancelled{reason}; its process group was killed.\n"
            f"Output so far:\n{output}"
        )
    code = run.returncode
    if run.signal is not None:
        status = f"killed by signal {run.signal}"
    else:
        status = f"killed by signal {-code}" if code is not None and code < 0 else str(code)
    return ToolResult(output=f"{output.rstrip()}\n\nExit code: {status}", display=f"exit {status}")
