"""What the test kit's servers share: a ``with`` block starts one and stops it at its end;
a program of the machine's (HAProxy, tinyproxy) runs on a free loopback port, in a folder of
its own, as a child that dies with the process that started it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

START_TIMEOUT_SECONDS = 30  # a program's start, and its stop before it is killed


class Service(ABC):
    """A server a test runs for a ``with`` block, or between :meth:`start` and :meth:`stop`."""

    @abstractmethod
    def start(self) -> Self:
        """Start serving; returns the service itself."""

    @abstractmethod
    def stop(self) -> None:
        """Stop serving and release what it holds."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def free_port() -> int:
    """A loopback port nothing listens on now (another process may take it before we bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ProgramService(Service):
    """A server program on :attr:`port` of 127.0.0.1, its files in :attr:`_root` (removed at
    :meth:`stop`); subclasses write its configuration and call :meth:`_launch`."""

    name = "the program"  # in the error of a start that failed

    def __init__(self, program: Path | None) -> None:
        self.program = program
        self.port = 0
        self._root: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def _output(self) -> str:
        """What the program printed (the end of it is shown when it does not start)."""
        return ""

    def _launch(
        self, command: Sequence[str], output: Path, env: Mapping[str, str] | None = None
    ) -> None:
        """Start ``command`` writing to ``output``, ending with the process that started it."""
        if shutil.which("setpriv"):
            command = ["setpriv", "--pdeathsig=SIGTERM", *command]
        with output.open("ab") as out:
            self._process = subprocess.Popen(
                list(command), stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env
            )

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def _wait_while_starting(self) -> bool:
        """Until it listens (True), exits, or :data:`START_TIMEOUT_SECONDS` pass."""
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while self._process is not None and self._process.poll() is None:
            if self._listening():
                return True
            if time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        return False

    def _wait_until_listening(self) -> None:
        """Until it listens, or :class:`RuntimeError` with its exit status and output."""
        if self._wait_while_starting():
            return
        status = None if self._process is None else self._process.poll()
        output = self._output()
        self._end_process()
        raise RuntimeError(f"{self.name} did not start (exit {status}):\n{output[-2000:]}")

    def _end_process(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=START_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def stop(self) -> None:
        self._end_process()
        root, self._root = self._root, None
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
