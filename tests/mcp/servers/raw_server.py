"""A hand-written stdio MCP server that misbehaves on purpose (argv[1] chooses how).

malformed: answers tools/call with a result whose content is not a list.
bad-message: answers tools/call with a line that is not a JSON-RPC response (result a string).
bad-initialize: answers initialize the same way.
refuse-initialize: answers initialize with a JSON-RPC error.
bad-tools: lists a tool whose name is a number.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "malformed"
TOOL = {"name": "broken", "description": "Returns garbage", "inputSchema": {"type": "object"}}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        continue
    if method == "initialize" and MODE == "bad-initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": "ready"})
    elif method == "initialize" and MODE == "refuse-initialize":
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32603, "message": "no licence"}})
    elif method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "0"},
                },
            }
        )
    elif method == "tools/list":
        tools = [{**TOOL, "name": 5}] if MODE == "bad-tools" else [TOOL]
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
    elif method == "tools/call" and MODE == "bad-message":
        send({"jsonrpc": "2.0", "id": ident, "result": "done"})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": "not a list", "isError": 3}})
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}})
