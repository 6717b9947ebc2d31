"""What the model sees of an MCP result: text, media, errors, resources (real server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from cairn.abort import AbortSignal
from cairn.mcp.manager import SessionMcp
from cairn.tools.base import Tool, ToolContext

from .helpers import stdio_config, tools_server

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tools(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Tool]]:
    """One server for the module: these tests only read from it."""
    folder = tmp_path_factory.mktemp("mcp-server")
    view = SessionMcp(None, [stdio_config(tools_server(folder))], cwd=folder)
    view.start()
    assert await view.wait_for_discovery(30) == []
    yield {t.name: t for t in view.tools(["read_file"])}
    await view.aclose()


def _ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, abort=AbortSignal())


async def test_an_image_is_passed_on_as_media_and_named_in_the_text(
    tools: dict[str, Tool], tmp_path: Path
) -> None:
    result = await tools["mcp__tools__picture"].execute({}, _ctx(tmp_path))
    assert result.output == "a tiny picture\n[image: image/png, 32 bytes]"
    [image] = result.media
    assert (image.mime_type, image.source) == ("image/png", "tools:picture")


async def test_is_error_becomes_an_error_result_with_the_servers_text(
    tools: dict[str, Tool], tmp_path: Path
) -> None:
    result = await tools["mcp__tools__fail"].execute({}, _ctx(tmp_path))
    assert result.error is not None and "the fail tool always fails" in result.error


async def test_the_description_and_schema_are_the_servers(tools: dict[str, Tool]) -> None:
    echo = tools["mcp__tools__echo"]
    assert echo.description.startswith("Echo the text back.")
    assert echo.parameters["type"] == "object"
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert "$schema" not in echo.parameters


async def test_resources_are_listed_and_read(tools: dict[str, Tool], tmp_path: Path) -> None:
    listing = await tools["list_mcp_resources"].execute({}, _ctx(tmp_path))
    assert listing.output == "tools: notes://today (today) — Today's notes."
    read = await tools["read_mcp_resource"].execute(
        {"server": "tools", "uri": "notes://today"}, _ctx(tmp_path)
    )
    assert (
        read.output == '<resource uri="notes://today" mimeType="text/plain">\nbuy milk\n</resource>'
    )
    missing = await tools["read_mcp_resource"].execute(
        {"server": "nope", "uri": "notes://today"}, _ctx(tmp_path)
    )
    assert missing.error == "no MCP server named 'nope' (servers: tools)."
