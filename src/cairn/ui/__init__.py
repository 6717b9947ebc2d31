"""The interactive terminal UI (Textual). Importing this package does not import Textual."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.ui.launch import run_interactive

__all__ = ["run_interactive"]

__getattr__, __dir__ = lazy_exports(__name__, {"run_interactive": "launch"}, __all__)
