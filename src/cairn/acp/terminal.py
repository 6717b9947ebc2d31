"""Commands in the editor's terminals (``terminal/*``), for clients that declare ``terminal``.

``run_shell_command`` gets an :class:`AcpTerminals` as its
:class:`~cairn.tools.base.CommandRunner`: the command runs in a terminal the editor creates and
shows inside the tool call as it runs; the model still gets its output (``terminal/output``
after the exit). The shell tool decides the time limit and the cancel; here each terminal
method is one request, and a refused request is the model's error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import TypeVar

from acp.exceptions import RequestError
from acp.interfaces import Client
from acp.schema import EnvVariable

from cairn.acp.frontend import client_error
from cairn.acp.requests import OutgoingRequests, withdrawable
from cairn.debug_log import get_logger
from cairn.tools.base import CommandExit, ToolError

__all__ = ["AcpTerminal", "AcpTerminals"]

_log = get_logger("ACP")
_T = TypeVar("_T")


@dataclass(eq=False)
class AcpTerminals:
    """One session's :class:`~cairn.tools.base.CommandRunner`: a terminal per command."""

    client: Client
    session_id: str
    _: KW_ONLY
    output_bytes: int  # the client keeps at most this much of a command's output
    requests: OutgoingRequests | None = None

    async def start(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> AcpTerminal:
        created = await _answer(
            "The editor could not run the command",
            self.client.create_terminal(
                session_id=self.session_id,
                command=argv[0],
                args=list(argv[1:]),
                # the whole environment: a client may start from its own or from nothing
                env=[EnvVariable(name=name, value=value) for name, value in env.items()],
                cwd=str(cwd),
                output_byte_limit=self.output_bytes,
            ),
        )
        return AcpTerminal(self.client, self.session_id, created.terminal_id, self.requests)


@dataclass(eq=False)
class AcpTerminal:
    """A command running in one editor terminal."""

    client: Client
    session_id: str
    terminal_id: str
    requests: OutgoingRequests | None = None

    async def wait(self) -> CommandExit:
        done = await _answer(
            "The editor's terminal failed",
            withdrawable(
                self.requests,
                self.client.wait_for_terminal_exit(
                    session_id=self.session_id, terminal_id=self.terminal_id
                ),
            ),
        )
        return CommandExit(done.exit_code, done.signal)

    async def kill(self) -> None:
        await self._tell(
            "terminal/kill",
            self.client.kill_terminal(session_id=self.session_id, terminal_id=self.terminal_id),
        )

    async def output(self) -> tuple[str, bool]:
        shown = await _answer(
            "The editor's terminal kept no output",
            self.client.terminal_output(session_id=self.session_id, terminal_id=self.terminal_id),
        )
        return shown.output, shown.truncated

    async def release(self) -> None:
        await self._tell(
            "terminal/release",
            self.client.release_terminal(session_id=self.session_id, terminal_id=self.terminal_id),
        )

    async def _tell(self, method: str, request: Awaitable[object]) -> None:
        """Await a request whose failure only the log hears of (the command is over anyway)."""
        try:
            await request
        except (RequestError, ConnectionError) as exc:
            _log.warning(f"{method} {self.terminal_id} failed: {client_error(exc)}")


async def _answer(failure: str, request: Awaitable[_T]) -> _T:
    """Await a request the tool needs; a refusal is the model's :class:`ToolError`."""
    try:
        return await request
    except (RequestError, ConnectionError) as exc:
        raise ToolError(f"{failure}: {client_error(exc)}") from None
