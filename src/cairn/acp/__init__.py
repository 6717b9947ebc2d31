"""``cairn --acp``: cairn as an Agent Client Protocol agent over stdio (for Zed and other editors).

Importing this package is cheap: the ``acp`` SDK, the session runtime and everything else are
imported only inside :func:`run_acp_agent`.
"""

from __future__ import annotations

__all__ = ["run_acp_agent"]


def run_acp_agent(*, model: str | None, approval_mode: str | None) -> int:
    """Serve ACP on stdin/stdout until the client closes stdin; returns the exit code."""
    from cairn.acp.main import run_acp_agent as run

    return run(model=model, approval_mode=approval_mode)
