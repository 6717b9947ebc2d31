"""``/mcp`` in the terminal UI: the servers, updated live as they connect."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cairn.ui.dialogs import McpScreen

from ..mcp.helpers import tools_server
from ..polling import DEADLINE_SECONDS
from .conftest import send, settle
from .helpers import screen_text

pytestmark = pytest.mark.slow
SIZE = (110, 30)


async def test_mcp_shows_a_server_connecting_then_connected(make_app, tmp_path: Path) -> None:
    """The server connects only once the screen has shown it connecting. (It used to hang for
    1.5 s, which a loaded machine spent before the screen opened.)"""
    go = tmp_path / "go"
    server = tools_server(tmp_path, MCP_TEST_WAIT_FOR=str(go))
    app = make_app({"mcpServers": {"tools": server.stdio_config()}})
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/mcp")
        await settle(pilot)
        assert isinstance(app.screen, McpScreen)
        assert "- tools [stdio, user] connecting: 0 tools" in screen_text(app)
        go.touch()
        deadline = time.monotonic() + DEADLINE_SECONDS
        while "connected: 7 tools" not in screen_text(app) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert "- tools [stdio, user] connected: 7 tools, 1 prompt, 1 resource" in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, McpScreen)


async def test_mcp_without_servers_says_how_to_add_one(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/mcp")
        await settle(pilot)
        assert "No MCP servers are configured. `cairn mcp add` adds one" in screen_text(app)


async def test_an_mcp_prompt_completes_and_runs_as_a_slash_command(
    make_app, scripted_server, tmp_path: Path
) -> None:
    from cairn.testing import reply

    app = make_app({"mcpServers": {"tools": tools_server(tmp_path).stdio_config()}})
    scripted_server.enqueue(reply("Reviewed."))
    async with app.run_test(size=SIZE) as pilot:
        servers = app.session.mcp.servers
        assert await servers.wait_for_discovery(30) == []
        await send(pilot, "/mcp__tools__review app.py")
        await settle(pilot)
    [request] = scripted_server.requests
    assert "Please review app.py, looking for bugs." in str(request.messages)


async def test_mcp_and_enter_opens_mcp_even_when_a_server_has_prompts(
    make_app, tmp_path: Path
) -> None:
    """Issue #30: with a server offering prompts, completion put `/mcp__<server>__<prompt>`
    first and Enter took it instead of running `/mcp`: an exact command wins."""
    app = make_app({"mcpServers": {"tools": tools_server(tmp_path).stdio_config()}})
    async with app.run_test(size=SIZE) as pilot:
        assert await app.session.mcp.servers.wait_for_discovery(30) == []
        await pilot.pause()
        await pilot.press("/", "m", "c", "p")
        assert app.menu.completions[0].label == "/mcp"
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, McpScreen)
