"""Import httpx without its command-line module.

``import httpx`` also imports ``httpx._main`` (its CLI), which pulls in rich's progress bars,
syntax highlighting and pygments: about 90 ms of start-up that cairn never uses. We register a
stand-in for that one module before importing httpx; calling its ``main`` loads the real one.
"""

from __future__ import annotations

import sys
import types
from typing import Any

if "httpx" not in sys.modules and "httpx._main" not in sys.modules:
    _stub = types.ModuleType("httpx._main")

    def _main(*args: Any, **kwargs: Any) -> Any:
        del sys.modules["httpx._main"]
        import importlib

        return importlib.import_module("httpx._main").main(*args, **kwargs)

    _stub.main = _main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = _stub

import httpx

__all__ = ["httpx"]
