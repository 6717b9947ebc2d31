"""An MCP server for cairn's MCP tests; behaviour chosen by environment variables.

MCP_TEST_LOG: a file the server appends events to ("start <pid>", "cancelled slow", ...).
MCP_TEST_GARBAGE=1: print lines that are not JSON-RPC on stdout before serving.
MCP_TEST_HANG_SECONDS=N: sleep before serving (a server that hangs in initialize).
MCP_TEST_WAIT_FOR=PATH: serve only once PATH exists (a server that connects when the test says).
MCP_TEST_FAIL_START=1: exit at once with an error on stderr (a server that fails to start).
MCP_TEST_REPORT_ENV=A,B: log "env {json}" at start, the values of these variables (null: unset).

It is built on the official SDK's low-level ``Server`` rather than FastMCP, and answers as the
FastMCP version of this server did, byte for byte where a client can see it (tool schemas with
their ``outputSchema``, ``structuredContent``, error texts), except the wording of a bad
argument's error and ``serverInfo.version``. FastMCP's import pulls in Starlette, uvicorn,
pydantic-settings and rich: with the SDK imported by parts (``cairn.mcp.sdk_imports``, as
``cairn.testing.mcp`` does) a start costs ~0.8 s of CPU instead of ~1.4 s, and every MCP test
starts at least one. Run it with
``python -m cairn.testing.mcp tests/mcp/servers/tools_server.py [--transport http --port 0]``.
"""

from __future__ import annotations

import os
import sys
import time

# A server told to fail or to hang does so before importing the MCP SDK (~0.5 s of CPU, most of
# a server's start): the client sees the same exit or silence, and the test does not pay for it.
if os.environ.get("MCP_TEST_FAIL_START"):
    print("fatal: the test server was told to fail", file=sys.stderr)
    sys.exit(3)
if os.environ.get("MCP_TEST_GARBAGE"):
    print("this is not JSON-RPC", flush=True)
    print("{not json either", flush=True)
hang = float(os.environ.get("MCP_TEST_HANG_SECONDS", "0"))
if hang:
    time.sleep(hang)

import base64  # noqa: E402
import json  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402
import mcp.types as types  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402

LOG = os.environ.get("MCP_TEST_LOG")


def log(event: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as handle:
            handle.write(event + "\n")


if os.environ.get("MCP_TEST_WAIT_FOR"):  # after the imports: it serves at once when told
    while not os.path.exists(os.environ["MCP_TEST_WAIT_FOR"]):
        time.sleep(0.02)

app: Server[Any, Any] = Server("tools", version="1")  # not the SDK's: importlib.metadata
log(f"start {os.getpid()}")
if os.environ.get("MCP_TEST_REPORT_ENV"):
    names = os.environ["MCP_TEST_REPORT_ENV"].split(",")
    log("env " + json.dumps({name: os.environ.get(name) for name in names}))

Content = list[types.TextContent | types.ImageContent]


async def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


async def write_note(text: str) -> str:
    """Save a note (changes things: not read-only)."""
    log(f"note {text}")
    return f"saved note: {text}"


async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    log("slow started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        log("cancelled slow")
        raise
    return "slow done"


async def crash() -> str:
    """Exit the server process in the middle of the call."""
    log("crash")
    os._exit(7)


async def fail() -> str:
    """Raise an error (the result has isError)."""
    raise ValueError("the fail tool always fails")


async def picture() -> Content:
    """Return a caption and a small PNG."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()
    return [
        types.TextContent(type="text", text="a tiny picture"),
        types.ImageContent(type="image", data=png, mimeType="image/png"),
    ]


async def grow() -> str:
    """Add a tool named `extra` and tell the client the tool list changed."""
    TOOLS["extra"] = _Tool(extra)
    await app.request_context.session.send_tool_list_changed()
    return "added a tool"


async def extra() -> str:
    """A tool that appeared later."""
    return "extra tool ran"


class _Tool:
    """A tool as FastMCP describes and calls a function: its arguments (name → JSON type) and
    result (a string or content blocks) in the schemas FastMCP generated for them."""

    def __init__(
        self,
        run: Callable[..., Awaitable[Any]],
        arguments: dict[str, str] | None = None,
        read_only: bool = False,
    ) -> None:
        self.run, self.arguments = run, arguments or {}
        self.annotations = types.ToolAnnotations(readOnlyHint=True) if read_only else None

    def describe(self) -> types.Tool:
        name = self.run.__name__
        properties = {
            arg: {"title": arg.title(), "type": kind} for arg, kind in self.arguments.items()
        }
        inputs: dict[str, Any] = {"properties": properties}
        if self.arguments:
            inputs["required"] = list(self.arguments)
        inputs |= {"title": f"{name}Arguments", "type": "object"}
        return types.Tool(
            name=name,
            description=self.run.__doc__,
            inputSchema=inputs,
            outputSchema=_output_schema(name, self.run is picture),
            annotations=self.annotations,
        )

    async def call(self, arguments: dict[str, Any]) -> types.CallToolResult:
        name = self.run.__name__
        kinds = {"string": str, "number": (int, float)}
        for arg, kind in self.arguments.items():
            if not isinstance(arguments.get(arg), kinds[kind]):  # type: ignore[arg-type]
                return _error(f"Error executing tool {name}: {arg}: a {kind} is required")
        try:
            result = await self.run(**{arg: arguments[arg] for arg in self.arguments})
        except Exception as error:  # the SDK's FastMCP reports any error of a tool so
            return _error(f"Error executing tool {name}: {error}")
        if isinstance(result, str):
            content: Content = [types.TextContent(type="text", text=result)]
            return types.CallToolResult(content=content, structuredContent={"result": result})
        structured = [block.model_dump(mode="json", by_alias=True) for block in result]
        return types.CallToolResult(content=result, structuredContent={"result": structured})


def _output_schema(name: str, blocks: bool) -> dict[str, Any]:
    if blocks:  # FastMCP's schema of a list of content blocks, generated as it does
        from pydantic import create_model

        model = create_model(f"{name}Output", result=(Content, ...))
        return model.model_json_schema()
    result = {"title": "Result", "type": "string"}
    return {
        "properties": {"result": result},
        "required": ["result"],
        "title": f"{name}Output",
        "type": "object",
    }


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


TOOLS = {
    "echo": _Tool(echo, {"text": "string"}, read_only=True),
    "write_note": _Tool(write_note, {"text": "string"}),
    "slow": _Tool(slow, {"seconds": "number"}),
    "crash": _Tool(crash),
    "fail": _Tool(fail),
    "picture": _Tool(picture),
    "grow": _Tool(grow),
}


@app.list_tools()
async def list_tools() -> list[types.Tool]:
    return [tool.describe() for tool in TOOLS.values()]


@app.call_tool(validate_input=False)  # _Tool.call checks the arguments, as FastMCP does
async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    if name not in TOOLS:
        return _error(f"Unknown tool: {name}")
    return await TOOLS[name].call(arguments)


REVIEW = types.Prompt(
    name="review",
    description="Review a file.",
    arguments=[
        types.PromptArgument(name="path", required=True),
        types.PromptArgument(name="focus", required=False),
    ],
)


@app.list_prompts()
async def list_prompts() -> list[types.Prompt]:
    return [REVIEW]


@app.get_prompt()
async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
    if name != REVIEW.name:
        raise ValueError(f"Unknown prompt: {name}")
    arguments = arguments or {}
    if "path" not in arguments:
        raise ValueError("Missing required arguments: {'path'}")
    text = f"Please review {arguments['path']}, looking for {arguments.get('focus', 'bugs')}."
    message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.GetPromptResult(description=REVIEW.description, messages=[message])


TODAY = types.Resource(
    uri="notes://today",  # type: ignore[arg-type]
    name="today",
    description="Today's notes.",
    mimeType="text/plain",
)


@app.list_resources()
async def list_resources() -> list[types.Resource]:
    return [TODAY]


@app.list_resource_templates()
async def list_resource_templates() -> list[types.ResourceTemplate]:
    return []


@app.read_resource()
async def read_resource(uri: Any) -> list[Any]:
    from mcp.server.lowlevel.helper_types import ReadResourceContents

    if str(uri) != str(TODAY.uri):
        raise ValueError(f"Unknown resource: {uri}")
    return [ReadResourceContents(content="buy milk", mime_type="text/plain")]
