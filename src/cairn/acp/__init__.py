"""``cairn --acp``: cairn as an Agent Client Protocol agent over stdio (for Zed and other editors).

Importing this package is cheap: the ``acp`` SDK, the session runtime and everything else are
imported only when :func:`run_acp_agent` runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.acp.main import run_acp_agent

__all__ = ["run_acp_agent"]

__getattr__, __dir__ = lazy_exports(__name__, {"run_acp_agent": "main"}, __all__)
