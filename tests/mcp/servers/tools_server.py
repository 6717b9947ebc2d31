"""A FastMCP server for cairn's MCP tests; behaviour chosen by environment variables.

MCP_TEST_LOG: a file the server appends events to ("start <pid>", "cancelled slow", ...).
MCP_TEST_GARBAGE=1: print lines that are not JSON-RPC on stdout before serving.
MCP_TEST_HANG_SECONDS=N: sleep before serving (a server that hangs in initialize).
MCP_TEST_WAIT_FOR=PATH: serve only once PATH exists (a server that connects when the test says).
MCP_TEST_FAIL_START=1: exit at once with an error on stderr (a server that fails to start).
MCP_TEST_REPORT_ENV=A,B: log "env {json}" at start, the values of these variables (null: unset).
"""

from __future__ import annotations

import os
import sys
import time

# A server told to fail or to hang does so before importing the MCP SDK (~1.5 s of CPU, most of
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

import anyio  # noqa: E402
from mcp.server.fastmcp import Context, FastMCP  # noqa: E402
from mcp.types import ImageContent, TextContent, ToolAnnotations  # noqa: E402

LOG = os.environ.get("MCP_TEST_LOG")


def log(event: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as handle:
            handle.write(event + "\n")


if os.environ.get("MCP_TEST_WAIT_FOR"):  # after the imports: it serves at once when told
    while not os.path.exists(os.environ["MCP_TEST_WAIT_FOR"]):
        time.sleep(0.02)

app = FastMCP("tools")
log(f"start {os.getpid()}")
if os.environ.get("MCP_TEST_REPORT_ENV"):
    names = os.environ["MCP_TEST_REPORT_ENV"].split(",")
    log("env " + json.dumps({name: os.environ.get(name) for name in names}))


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@app.tool()
def write_note(text: str) -> str:
    """Save a note (changes things: not read-only)."""
    log(f"note {text}")
    return f"saved note: {text}"


@app.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    log("slow started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        log("cancelled slow")
        raise
    return "slow done"


@app.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    log("crash")
    os._exit(7)


@app.tool()
def fail() -> str:
    """Raise an error (the result has isError)."""
    raise ValueError("the fail tool always fails")


@app.tool()
def picture() -> list[TextContent | ImageContent]:
    """Return a caption and a small PNG."""
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()
    return [
        TextContent(type="text", text="a tiny picture"),
        ImageContent(type="image", data=png, mimeType="image/png"),
    ]


@app.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named `extra` and tell the client the tool list changed."""

    def extra() -> str:
        """A tool that appeared later."""
        return "extra tool ran"

    app.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "added a tool"


@app.prompt()
def review(path: str, focus: str = "bugs") -> str:
    """Review a file."""
    return f"Please review {path}, looking for {focus}."


@app.resource("notes://today", mime_type="text/plain")
def today() -> str:
    """Today's notes."""
    return "buy milk"


if __name__ == "__main__":
    app.run()
