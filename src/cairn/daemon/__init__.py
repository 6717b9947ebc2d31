"""``cairn serve``: the HTTP daemon that serves cairn sessions to editors, scripts and the SDK.

Import-light on purpose: Starlette and uvicorn load only when :func:`run_daemon` is looked up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.daemon.server import run_daemon

__all__ = ["run_daemon"]

__getattr__, __dir__ = lazy_exports(__name__, {"run_daemon": "server"}, __all__)
