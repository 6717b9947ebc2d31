"""uvicorn without its command line: the parts the daemon serves with, and no more.

``uvicorn/__init__.py`` imports ``uvicorn.main`` (the ``uvicorn`` command: click, and the reload
and multiprocess supervisors with ``multiprocessing``) to offer ``uvicorn.run``: about 14 ms of
CPU, one fourteenth of a ``cairn serve`` start (benchmarks/README.md, issue #25), which serves
with :class:`Config` and :class:`Server` only. Importing this module registers the ``uvicorn``
package without running its ``__init__`` (as :mod:`cairn.mcp.sdk_imports` does for the MCP SDK):
``uvicorn.Config`` and ``uvicorn.Server`` (which uvicorn's own lifespan module imports by that
name) come from their modules, a submodule imports as usual, and any other name the
``__init__`` defines (``uvicorn.run``) runs it on first use, so nothing fails. Nothing changes
when uvicorn was imported already.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from typing import Any

__all__ = ["Config", "H11Protocol", "Server"]

_PACKAGE = "uvicorn"
_HOMES = {"Config": "uvicorn.config", "Server": "uvicorn.server"}  # name -> module defining it
_lock = threading.Lock()


def _register() -> None:
    if _PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or spec.loader is None:
        return
    package = importlib.util.module_from_spec(spec)

    def attribute(name: str) -> Any:
        home = _HOMES.get(name)
        if home is not None:
            value = getattr(importlib.import_module(home), name)
            setattr(package, name, value)
            return value
        if name.startswith("__"):
            raise AttributeError(name)
        try:  # a submodule (`from uvicorn import protocols`)
            return importlib.import_module(f"{_PACKAGE}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{_PACKAGE}.{name}":
                raise
        with _lock:  # a name only the __init__ defines: run it now
            if "__getattr__" in package.__dict__:
                del package.__dict__["__getattr__"]
                assert spec.loader is not None
                spec.loader.exec_module(package)
        return getattr(package, name)

    package.__dict__["__getattr__"] = attribute
    sys.modules[_PACKAGE] = package


_register()

from uvicorn.config import Config  # noqa: E402 - after the package is registered
from uvicorn.protocols.http.h11_impl import H11Protocol  # noqa: E402
from uvicorn.server import Server  # noqa: E402
