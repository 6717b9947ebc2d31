"""A hand-written stdio MCP server that misbehaves on purpose (argv[1] chooses how).

malformed: answers tools/call with a result whose content is not a list.
bad-message: answers tools/call with a line that is not a JSON-RPC response (result a string).
bad-initialize: answers initialize the same way.
refuse-initialize: answers initialize with a JSON-RPC error.
bad-tools: lists a tool whose name is a number.
huge: answers tools/call with one text of MCP_TEST_HUGE_MB megabytes (default 50), on one line.
deep: answers tools/call with a result nested 100,000 levels deep.
flood: sends 20,000 tools/list_changed notifications before answering tools/call.
bad-notification: sends notifications cairn cannot read (bad params, an unknown method), then
  a request with bad params, before answering tools/call; logs the answer to that request.
leaves-children: starts a `setsid` child and a daemon that double-forks away before serving,
  and writes their PIDs to MCP_TEST_CHILD_PIDS.

Every request's method is logged to MCP_TEST_LOG (when set), one per line.
"""

from __future__ import annotations

import json
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "malformed"
TOOL = {"name": "broken", "description": "Returns garbage", "inputSchema": {"type": "object"}}


LOG = os.environ.get("MCP_TEST_LOG")
DEPTH = 100_000


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def log(text: str) -> None:
    if LOG:
        with open(LOG, "a") as out:
            out.write(text + "\n")


def text_result(ident: object, text: str) -> None:
    send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}})


def call(ident: object) -> None:
    """Answer tools/call as MODE says."""
    if MODE == "huge":
        megabytes = int(os.environ.get("MCP_TEST_HUGE_MB", "50"))
        text_result(ident, "x" * (megabytes * 1024 * 1024))
    elif MODE == "deep":
        head = f'{{"jsonrpc": "2.0", "id": {json.dumps(ident)}, "result": {{"content": '
        sys.stdout.write(head + "[" * DEPTH + "]" * DEPTH + "}}\n")
        sys.stdout.flush()
    elif MODE == "flood":
        changed = json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        sys.stdout.write((changed + "\n") * 20_000)
        text_result(ident, "flooded")
    elif MODE == "bad-notification":
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": "x"}})
        send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"a": 1}})
        send({"jsonrpc": "2.0", "id": "ask-1", "method": "sampling/createMessage", "params": {}})
        text_result(ident, "noisy")
    elif MODE == "bad-message":
        send({"jsonrpc": "2.0", "id": ident, "result": "done"})
    else:
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": "not a list", "isError": 3}})


def initialize(ident: object, request: dict) -> None:
    if MODE == "bad-initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": "ready"})
    elif MODE == "refuse-initialize":
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32603, "message": "no licence"}})
    else:
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "0"},
        }
        send({"jsonrpc": "2.0", "id": ident, "result": result})


if MODE == "leaves-children":
    import subprocess

    pids = os.environ["MCP_TEST_CHILD_PIDS"]
    subprocess.Popen(["setsid", "sh", "-c", f"echo $$ >> {pids}; exec sleep 3600"])
    subprocess.Popen(["sh", "-c", f"(setsid sh -c 'echo $$ >> {pids}; exec sleep 3601' &)"])

for line in sys.stdin:
    request = json.loads(line)
    method, ident = request.get("method"), request.get("id")
    if method is None:  # an answer to a request of ours
        log(f"answer {json.dumps(request)}")
        continue
    if ident is None:  # a notification
        continue
    log(method)
    if method == "initialize":
        initialize(ident, request)
    elif method == "tools/list":
        tools = [{**TOOL, "name": 5}] if MODE == "bad-tools" else [TOOL]
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
    elif method == "tools/call":
        call(ident)
    else:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}})
