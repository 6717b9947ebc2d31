"""What the test kit's servers share: a ``with`` block starts one and stops it at its end."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


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
