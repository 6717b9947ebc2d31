"""Package exports loaded on first use (PEP 562 module ``__getattr__``).

A package ``__init__`` that imported every submodule would make importing any one of them
(``cairn.tools.base``) load them all; start-up paths import only what they use instead. Usage::

    __getattr__, __dir__ = lazy_exports(__name__, {"HookRunner": "runner"}, __all__)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], public: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``name`` comes from ``homes[name]``, a
    submodule of ``package`` (``"store.history"``) or, written in full, any module
    (``"cairn.vocabulary.events"``: a name re-exported from elsewhere)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = home if home.startswith("cairn.") else f"{package}.{home}"
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__
