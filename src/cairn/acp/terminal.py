"""Commands in the editor's terminals (``terminal/*``), for clients that declare ``terminal``.

``run_shell_command`` gets an :class:`AcpTerminals` as its
:class:`~cairn.tools.base.CommandRunner`: the command runs in a terminal the editor creates and
shows inside the tool call as it runs; the model still gets its output (``terminal/output``
after the exit). The shell tool decides the time limit and the cancel; here each terminal
method is one request, and a refused request is the model's error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from acp.exceptions import RequestError
from acp.interfaces import Client
from acp.schema import EnvVariable

from cairn.acp.frontend import client_error
from cairn.acp.requests import OutgoingRequests, withdrawable
from cairn.debug_log import get_logger
from cairn.tools.base import CommandExit, ToolError

__all__ = ["AcpTerminal", "AcpTerminals"]

_log = get_logger("ACP")


class AcpTerminals:
    """One session's :class:`~cairn.tools.base.CommandRunner`: a terminal per command."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        output_bytes: int,
        requests: OutgoingRequests | None = None,
    ) -> None:
        self._client = client
        self._session_id = session_id
        self._output_bytes = output_bytes
        self._requests = requests

    async def start(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> AcpTerminal:
        try:
            created = await self._client.create_terminal(
                session_id=self._session_id,
                command=argv[0],
                args=list(argv[1:]),
                # the whole environment: a client may start from its own or from nothing
                env=[EnvVariable(name=name, value=value) for name, value in env.items()],
                cwd=str(cwd),
                output_byte_limit=self._output_bytes,
            )
        except (RequestError, ConnectionError) as exc:
            raise ToolError(f"The editor could not run the command: {client_error(exc)}") from None
        return AcpTerminal(self._client, self._session_id, created.terminal_id, self._requests)


class AcpTerminal:
    """A command running in one editor terminal."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        terminal_id: str,
        requests: OutgoingRequests | None = None,
    ) -> None:
        self._client = client
        self._session_id = session_id
        self.terminal_id: str | None = terminal_id
        self._id = terminal_id
        self._requests = requests

    async def wait(self) -> CommandExit:
        try:
            done = await withdrawable(
                self._requests,
                self._client.wait_for_terminal_exit(
                    session_id=self._session_id, terminal_id=self._id
                ),
            )
        except (RequestError, ConnectionError) as exc:
            raise ToolError(f"The editor's terminal failed: {client_error(exc)}") from None
        return CommandExit(done.exit_code, done.signal)

    async def kill(self) -> None:
        try:
            await self._client.kill_terminal(session_id=self._session_id, terminal_id=self._id)
        except (RequestError, ConnectionError) as exc:
            _log.warning(f"terminal/kill {self._id} failed: {client_error(exc)}")

    async def output(self) -> tuple[str, bool]:
        try:
            shown = await self._client.terminal_output(
                session_id=self._session_id, terminal_id=self._id
            )
        except (RequestError, ConnectionError) as exc:
            raise ToolError(f"The editor's terminal kept no output: {client_error(exc)}") from None
        return shown.output, shown.truncated

    async def release(self) -> None:
        try:
            await self._client.release_terminal(session_id=self._session_id, terminal_id=self._id)
        except (RequestError, ConnectionError) as exc:
            _log.warning(f"terminal/release {self._id} failed: {client_error(exc)}")
