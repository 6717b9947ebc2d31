"""cairn: a terminal AI coding agent with a managed, human-readable long-term memory.

The names below are loaded on first use, so ``import cairn`` (which every submodule triggers)
costs nothing; embedding cairn in another program starts from :class:`Runtime`.
"""

from __future__ import annotations

import importlib

from cairn._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (``cairn --version``)
if TYPE_CHECKING:
    from typing import Any

    from cairn.config import Endpoint, Settings, load_settings, resolve_endpoint
    from cairn.session import PromptRequest, Runtime, Session, TurnResult

__all__ = [
    "Endpoint",
    "PromptRequest",
    "Runtime",
    "Session",
    "Settings",
    "TurnResult",
    "__version__",
    "load_settings",
    "resolve_endpoint",
]

_LAZY = {
    "Endpoint": "cairn.config",
    "Settings": "cairn.config",
    "load_settings": "cairn.config",
    "resolve_endpoint": "cairn.config",
    "PromptRequest": "cairn.session",
    "Runtime": "cairn.session",
    "Session": "cairn.session",
    "TurnResult": "cairn.session",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cairn' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
