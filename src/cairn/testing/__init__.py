"""Test doubles for cairn and for users' own tests of their settings and hooks.

- :class:`ScriptedServer`: an OpenAI-compatible chat-completions server on 127.0.0.1 that
  records every request and answers from a script of :class:`Reply` objects.
- :class:`ScriptedProvider`: the same replies played in process, without HTTP.
- :class:`ScriptedFrontend`: the person at the front end, answering approvals and questions
  from scripts and recording what it was asked (:data:`NEVER`: an answer that never comes).
- :class:`FastMCPServer`: an MCP server script (FastMCP or the SDK's low-level ``Server``) run
  over stdio (by cairn) or streamable HTTP on 127.0.0.1 (by the helper), for tests of MCP
  settings.
- ``cairn.testing.fixtures``: a pytest plugin with the ``scripted_server`` and ``cairn_env``
  fixtures (a pytest plugin registered by the package: no configuration needed).

The server is imported on first use, so ``python -m cairn.testing.server`` runs it cleanly and
importing this package for :func:`reply` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports
from cairn.testing.request import RecordedRequest
from cairn.testing.script import Reply, ToolCallSpec, error_reply, reply, tool_call, tool_calls

if TYPE_CHECKING:
    from cairn.testing.frontend import NEVER, ScriptedFrontend, UnexpectedRequest
    from cairn.testing.mcp import FastMCPServer, RunningMcpServer
    from cairn.testing.provider import ScriptedProvider
    from cairn.testing.server import ScriptedServer

__all__ = [
    "NEVER",
    "FastMCPServer",
    "RecordedRequest",
    "Reply",
    "RunningMcpServer",
    "ScriptedFrontend",
    "ScriptedProvider",
    "ScriptedServer",
    "ToolCallSpec",
    "UnexpectedRequest",
    "error_reply",
    "reply",
    "tool_call",
    "tool_calls",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "NEVER": "frontend",
        "ScriptedFrontend": "frontend",
        "UnexpectedRequest": "frontend",
        "FastMCPServer": "mcp",
        "RunningMcpServer": "mcp",
        "ScriptedServer": "server",
        "ScriptedProvider": "provider",
    },
    __all__,
)
