"""MCP servers through the real ``cairn -p`` process, with real MCP servers (the official SDK's)."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cairn.testing import Reply, ScriptedServer, ToolCallSpec, reply, tool_call
from cairn.testing.mcp import FastMCPServer, pid_alive
from cairn.testing.tinyproxy import TinyProxy, find_tinyproxy
from cairn.tools.permissions import PLAN_MODE_MESSAGE

from ..mcp.helpers import (
    PATIENT_DISCOVERY,
    RAW_SERVER,
    SECRET_NAMES,
    SECRETS_DROPPED,
    reported_environments,
    server_log,
    tools_server,
    with_secrets,
)
from ..polling import eventually
from .conftest import CAIRN, RunCairn, run_probed, trust_in_user_settings, write_settings

pytestmark = pytest.mark.slow


def _settings(project: Path, servers: dict[str, Any], **extra: Any) -> None:
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "mcp": PATIENT_DISCOVERY,
            "mcpServers": servers,
            **extra,
        },
    )
    trust_in_user_settings(project)  # a project's MCP servers start only in a trusted folder


def _tool_names(request: Any) -> list[str]:
    return [t["function"]["name"] for t in request.tools]


def _tool_messages(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def _assert_no_orphans(server: FastMCPServer) -> None:
    pids = server.pids()
    assert pids, "the server never started"
    assert [pid for pid in pids if pid_alive(pid)] == []


def test_a_tool_is_listed_called_and_its_result_sent_back(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    server = tools_server(tmp_path)
    _settings(project, {"tools": server.stdio_config(trust=True)})
    scripted_server.enqueue(tool_call("mcp__tools__write_note", {"text": "milk"}))
    scripted_server.enqueue(reply("Saved."))

    done = run_cairn("-p", "save a note")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Saved.\n"
    first, second = scripted_server.requests
    echo = next(t for t in first.tools if t["function"]["name"] == "mcp__tools__echo")
    assert echo["function"]["description"].startswith("Echo the text back.")
    assert echo["function"]["parameters"]["properties"]["text"]["type"] == "string"
    assert _tool_messages(second) == ["saved note: milk"]
    assert "note milk" in server_log(tmp_path)
    _assert_no_orphans(server)


def test_an_untrusted_tool_is_refused_when_nobody_can_approve_it(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    server = tools_server(tmp_path)
    _settings(project, {"tools": server.stdio_config()})
    scripted_server.enqueue(tool_call("mcp__tools__write_note", {"text": "nope"}))
    scripted_server.enqueue(reply("Could not."))

    done = run_cairn("-p", "save a note")

    assert done.returncode == 0, done.stderr
    [message] = _tool_messages(scripted_server.requests[1])
    assert "requires permission, but non-interactive mode cannot ask" in message
    assert "note nope" not in server_log(tmp_path)


@pytest.mark.parametrize(
    ("permissions", "expected"),
    [
        ({"allow": ["mcp__tools__*"]}, "saved note: ok"),
        ({"allow": ["mcp__tools"], "deny": ["mcp__tools__write_note"]}, "permissions.deny rule"),
    ],
    ids=["allow-rule", "deny-rule"],
)
def test_allow_and_deny_rules_see_the_full_mcp_name(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    tmp_path: Path,
    permissions: dict[str, list[str]],
    expected: str,
) -> None:
    server = tools_server(tmp_path)
    _settings(project, {"tools": server.stdio_config()}, permissions=permissions)
    scripted_server.enqueue(tool_call("mcp__tools__write_note", {"text": "ok"}))
    scripted_server.enqueue(reply("Done."))

    done = run_cairn("-p", "save", "--approval-mode", "yolo")

    assert done.returncode == 0, done.stderr
    [message] = _tool_messages(scripted_server.requests[1])
    assert expected in message


def test_a_pre_tool_use_hook_matching_the_mcp_name_blocks_the_call(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    server = tools_server(tmp_path)
    hook = tmp_path / "hook.py"
    hook.write_text(
        "import json, sys\n"
        "event = json.load(sys.stdin)\n"
        "open(sys.argv[1], 'w').write(event['tool_name'])\n"
        "print(json.dumps({'decision': 'block', 'reason': 'no notes today'}))\n"
    )
    seen = tmp_path / "seen.txt"
    command = f"{sys.executable} {hook} {seen}"
    _settings(
        project,
        {"tools": server.stdio_config(trust=True)},
        hooks={"PreToolUse": [{"matcher": "^mcp__tools__", "hooks": [{"command": command}]}]},
    )
    scripted_server.enqueue(tool_call("mcp__tools__write_note", {"text": "hooked"}))
    scripted_server.enqueue(reply("Blocked."))

    done = run_cairn("-p", "save")

    assert done.returncode == 0, done.stderr
    assert seen.read_text() == "mcp__tools__write_note"
    [message] = _tool_messages(scripted_server.requests[1])
    assert message == "Blocked by a PreToolUse hook: no notes today"
    assert "note hooked" not in server_log(tmp_path)


def test_a_prompt_is_a_slash_command(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    _settings(project, {"tools": tools_server(tmp_path).stdio_config()})
    scripted_server.enqueue(reply("Reviewed."))

    done = run_cairn("-p", "/mcp__tools__review src/app.py focus=style")

    assert done.returncode == 0, done.stderr
    [request] = scripted_server.requests
    user = [m["content"] for m in request.messages if m["role"] == "user"][-1]
    assert "Please review src/app.py, looking for style." in json.dumps(user)


def test_a_resource_is_read_by_the_tool_and_attached_by_a_mention(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    _settings(project, {"tools": tools_server(tmp_path).stdio_config()})
    scripted_server.enqueue(
        tool_call("read_mcp_resource", {"server": "tools", "uri": "notes://today"})
    )
    scripted_server.enqueue(reply("Milk."))

    done = run_cairn("-p", "what is in @tools:notes://today ?")

    assert done.returncode == 0, done.stderr
    first, second = scripted_server.requests
    assert "buy milk" in json.dumps(first.messages)  # the mention attached it
    [message] = _tool_messages(second)
    assert message == '<resource uri="notes://today" mimeType="text/plain">\nbuy milk\n</resource>'


def test_a_server_that_fails_to_start_is_reported_and_the_turn_goes_on(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    broken = tools_server(tmp_path, MCP_TEST_FAIL_START="1")
    _settings(project, {"broken": broken.stdio_config(), "ghost": {"command": "cairn-no-such-mcp"}})
    scripted_server.enqueue(reply("Fine anyway."))

    done = run_cairn("-p", "hello")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Fine anyway.\n"
    assert "MCP server broken: failed to start: the server exited with code 3" in done.stderr
    assert "the test server was told to fail" in done.stderr
    assert "MCP server ghost: cannot start `cairn-no-such-mcp`" in done.stderr
    assert not any(n.startswith("mcp__") for n in _tool_names(scripted_server.requests[0]))


def test_a_server_that_crashes_mid_turn_is_restarted_on_its_next_use(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    server = tools_server(tmp_path)
    _settings(project, {"tools": server.stdio_config(trust=True)})
    scripted_server.enqueue(tool_call("mcp__tools__crash", {}))
    scripted_server.enqueue(tool_call("mcp__tools__echo", {"text": "again"}))
    scripted_server.enqueue(reply("Recovered."))

    done = run_cairn("-p", "crash it")

    assert done.returncode == 0, done.stderr
    _, second, third = scripted_server.requests
    [crashed] = _tool_messages(second)
    assert "went away during the tool crash call" in crashed and "exited with code 7" in crashed
    assert _tool_messages(third)[-1] == "echo: again"
    assert len(server.pids()) == 2
    _assert_no_orphans(server)


def test_malformed_answers_are_errors_the_model_and_the_user_see(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """A server answering a call with a line that is not a JSON-RPC response, and one whose
    tool list is malformed: the call's result says so at once (no wait for the 10-minute
    timeout), the other server is reported as failed with why, and the turn goes on."""
    raw = [sys.executable, str(RAW_SERVER)]
    servers = {
        "raw": {"command": raw[0], "args": [raw[1], "bad-message"], "trust": True},
        "badlist": {"command": raw[0], "args": [raw[1], "bad-tools"], "trust": True},
    }
    _settings(project, servers)
    scripted_server.enqueue(tool_call("mcp__raw__broken", {}))
    scripted_server.enqueue(reply("It failed."))

    done = run_cairn("-p", "call it")

    assert done.returncode == 0, done.stderr
    [message] = _tool_messages(scripted_server.requests[1])
    assert "MCP server raw returned a malformed result for the tool broken call: result:" in (
        message
    )
    assert "MCP server badlist: sent a malformed answer to tools/list: tools.0.name:" in (
        done.stderr
    )


@pytest.mark.parametrize("images", [True, False], ids=["image-model", "text-only-model"])
def test_an_image_result_reaches_the_model_as_an_image_or_is_named(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    tmp_path: Path,
    images: bool,
) -> None:
    server = tools_server(tmp_path)
    _settings(project, {"tools": server.stdio_config(trust=True)}, model={"supportsImages": images})
    scripted_server.enqueue(tool_call("mcp__tools__picture", {}))
    scripted_server.enqueue(reply("A tiny picture."))

    done = run_cairn("-p", "show me")

    assert done.returncode == 0, done.stderr
    second = scripted_server.requests[1]
    [text] = _tool_messages(second)
    assert "a tiny picture" in text
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 24).decode()
    if images:
        assert second.images == [f"data:image/png;base64,{png}"]
    else:
        assert second.images == []
        assert "image/png" in text  # named for a model that cannot see it


def test_a_tool_list_change_offers_the_new_tool_in_the_next_request(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    server = tools_server(tmp_path)
    _settings(project, {"tools": server.stdio_config(trust=True)})
    scripted_server.enqueue(tool_call("mcp__tools__grow", {}))
    scripted_server.enqueue(tool_call("mcp__tools__extra", {}))
    scripted_server.enqueue(reply("Grown."))

    done = run_cairn("-p", "grow")

    assert done.returncode == 0, done.stderr
    first, second, third = scripted_server.requests
    assert "mcp__tools__extra" not in _tool_names(first)
    assert "mcp__tools__extra" in _tool_names(second)
    assert _tool_messages(third)[-1] == "extra tool ran"


def test_plan_mode_runs_read_only_tools_and_never_one_that_changes_things(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """Even on a trusted server with an allow rule: plan mode refuses a non-read-only tool."""
    server = tools_server(tmp_path)
    _settings(
        project,
        {"tools": server.stdio_config(trust=True)},
        permissions={"allow": ["mcp__tools__*"]},
    )
    scripted_server.enqueue(tool_call("mcp__tools__write_note", {"text": "planned"}))
    scripted_server.enqueue(tool_call("mcp__tools__echo", {"text": "looking"}))
    scripted_server.enqueue(reply("Here is the plan."))

    done = run_cairn("-p", "plan it", "--approval-mode", "plan")

    assert done.returncode == 0, done.stderr
    _, second, third = scripted_server.requests
    assert _tool_messages(second) == [PLAN_MODE_MESSAGE]
    assert _tool_messages(third)[-1] == "echo: looking"
    assert "note planned" not in server_log(tmp_path)


def test_a_server_still_connecting_past_the_bound_joins_a_later_request(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """The model keeps calling a built-in tool until a request offers the late server's tools.
    (It used to answer once after a fixed delay, which a loaded machine outran: the server was
    not up yet when the second request went out.)"""
    slow = tools_server(tmp_path, MCP_TEST_HANG_SECONDS="2")
    _settings(project, {"slow": slow.stdio_config()}, mcp={"discoveryTimeoutMs": 200})
    deadline = time.monotonic() + 120

    def until_the_server_joins(request: Any) -> Reply:
        if "mcp__slow__echo" in _tool_names(request) or time.monotonic() > deadline:
            return reply("Now I see it.")
        look = ToolCallSpec("glob", {"pattern": f"*.{request.index}"})  # never the same call
        return Reply(tool_calls=[look], delay=0.2)

    scripted_server.handler = until_the_server_joins

    done = run_cairn("-p", "hi", timeout=180)

    assert done.returncode == 0, done.stderr
    assert "MCP server(s) still connecting: slow" in done.stderr
    first, *_, last = scripted_server.requests
    assert "mcp__slow__echo" not in _tool_names(first)
    assert "mcp__slow__echo" in _tool_names(last)


def _starting_server(project: Path, tmp_path: Path, go: Path) -> None:
    """A server that connects only once ``go`` exists; the grace is cairn's own (300 ms)."""
    slow = tools_server(tmp_path, MCP_TEST_WAIT_FOR=str(go))
    write_settings(
        project,
        {"memory": {"enableManagedAutoMemory": False}, "mcpServers": {"slow": slow.stdio_config()}},
    )
    trust_in_user_settings(project)


def test_a_server_still_starting_does_not_hold_the_first_request(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """Issue #30: `cairn -p` waited the whole 5 s discovery bound for a slow server (npx). The
    server here connects only once the first request has arrived: that request cannot have
    waited for it. Its tools join the first request after it is ready, which is said once."""
    go = tmp_path / "go"
    _starting_server(project, tmp_path, go)
    deadline = time.monotonic() + 120

    def until_the_server_joins(request: Any) -> Reply:
        go.touch()  # the server may connect now that a request went out without it
        if "mcp__slow__echo" in _tool_names(request) or time.monotonic() > deadline:
            return reply("Now I see it.")
        look = ToolCallSpec("glob", {"pattern": f"*.{request.index}"})
        return Reply(tool_calls=[look], delay=0.2)

    scripted_server.handler = until_the_server_joins

    done = run_cairn("-p", "hi", "-o", "stream-json", timeout=180)

    assert done.returncode == 0, done.stderr
    first, *_, last = scripted_server.requests
    assert "mcp__slow__echo" not in _tool_names(first)
    assert "mcp__slow__echo" in _tool_names(last)
    notices = [
        m["text"]
        for m in map(json.loads, done.stdout.splitlines())
        if m.get("subtype") == "notice" and m.get("source") == "mcp"
    ]
    assert notices == [
        "MCP server(s) still connecting: slow; their tools join the first request after they "
        "are ready.",
        "MCP server slow is ready: its 7 tools are offered from now on.",
    ]


def test_a_servers_tools_from_its_last_start_are_offered_while_it_starts(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """Issue #30: a server whose tools are known from its last start is in the first request
    even while it is still starting; a call to one of its tools waits for it."""
    go = tmp_path / "go"
    _starting_server(project, tmp_path, go)
    go.touch()
    scripted_server.handler = lambda request: (
        reply("Known.")
        if "mcp__slow__echo" in _tool_names(request)
        else Reply(tool_calls=[ToolCallSpec("glob", {"pattern": f"*.{request.index}"})], delay=0.2)
    )
    assert run_cairn("-p", "first start", timeout=180).returncode == 0
    scripted_server.requests.clear()
    go.unlink()  # the second start waits until the model has called the server's tool

    def call_it(request: Any) -> Reply:
        if request.index == 0:
            assert "mcp__slow__echo" in _tool_names(request)  # offered before it connected
            go.touch()
            return tool_call("mcp__slow__echo", {"text": "early"}, id="e")
        return reply("Done.")

    scripted_server.handler = call_it

    done = run_cairn("-p", "second start", "--approval-mode", "yolo", timeout=180)

    assert done.returncode == 0, done.stderr
    first, second = scripted_server.requests
    assert "mcp__slow__echo" in _tool_names(first)
    assert _tool_messages(second) == ["echo: early"]
    assert "still connecting" not in done.stderr  # its tools were there all along


def test_cancelling_the_turn_cancels_the_call_and_leaves_no_process(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path, tmp_path: Path
) -> None:
    server = tools_server(tmp_path)
    _settings(project, {"tools": server.stdio_config(trust=True)})
    scripted_server.enqueue(tool_call("mcp__tools__slow", {"seconds": 60}))
    process = subprocess.Popen(
        [*CAIRN, "-p", "wait"],
        cwd=project,
        env=cairn_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert eventually(lambda: "slow started" in server_log(tmp_path)), "the server never started"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stderr
    assert "cancelled slow" in server_log(tmp_path)
    _assert_no_orphans(server)


@pytest.mark.parametrize("configured", [False, True], ids=["no-servers", "one-server"])
def test_the_mcp_sdk_is_imported_only_when_a_server_is_configured(
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    tmp_path: Path,
    configured: bool,
) -> None:
    if configured:
        _settings(project, {"tools": tools_server(tmp_path).stdio_config()})
    scripted_server.enqueue(reply("plain"))
    probe = (
        "import atexit, sys\n"
        "def report():\n"
        "    sys.stderr.write('MCP-LOADED\\n' if 'mcp' in sys.modules else '')\n"
        "    unused = ('mcp.server.fastmcp', 'mcp.server.lowlevel', 'starlette', 'uvicorn')\n"
        "    sys.stderr.write(''.join(f'UNUSED {m}\\n' for m in unused if m in sys.modules))\n"
        "atexit.register(report)\n"
        "from cairn.cli.main import main\n"
        "sys.argv = ['cairn', '-p', 'hi']\n"
        "main()\n"
    )
    done = run_probed(probe, project, cairn_env)
    assert done.stdout == "plain\n"
    assert ("MCP-LOADED" in done.stderr) == configured
    assert "UNUSED" not in done.stderr  # the SDK by its parts: not its servers (mcp/sdk_imports.py)


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_an_http_or_sse_server_from_settings_is_called(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    tmp_path: Path,
    transport: str,
) -> None:
    server = tools_server(tmp_path)
    with server.serve_http(transport) as running:  # type: ignore[arg-type]
        _settings(project, {"web": {**running.config, "trust": True}})
        scripted_server.enqueue(tool_call("mcp__web__echo", {"text": transport}))
        scripted_server.enqueue(reply("Echoed."))
        done = run_cairn("-p", "echo")
    assert done.returncode == 0, done.stderr
    assert _tool_messages(scripted_server.requests[1]) == [f"echo: {transport}"]


@pytest.mark.skipif(find_tinyproxy() is None, reason="tinyproxy is not installed")
def test_the_proxy_flag_carries_an_http_server_and_no_proxy_still_exempts_the_model(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    tmp_path: Path,
) -> None:
    """Bug: ``--proxy`` carried the model's requests and not an HTTP MCP server's (httpx read
    only its own variables): both now choose their proxy the same way, NO_PROXY included."""
    server = tools_server(tmp_path)
    model = f"127.0.0.1:{scripted_server.port}"
    env = {k: v for k, v in cairn_env.items() if k.lower() != "no_proxy"} | {"NO_PROXY": model}
    with TinyProxy() as proxy, server.serve_http("http") as running:
        _settings(project, {"web": {**running.config, "trust": True}})
        scripted_server.enqueue(tool_call("mcp__web__echo", {"text": "proxied"}))
        scripted_server.enqueue(reply("Echoed."))
        done = run_cairn("-p", "echo", "--proxy", proxy.url, env=env)
        carried = proxy.requests()

    assert done.returncode == 0, done.stderr
    assert _tool_messages(scripted_server.requests[1]) == ["echo: proxied"]
    assert f"POST {running.url}" in carried
    assert not any(model in request for request in carried)  # NO_PROXY: the model went direct


def test_a_stdio_server_gets_cairns_environment_without_its_secrets(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    tmp_path: Path,
) -> None:
    """Bug (tools track, 12:42): stdio servers were started with all of cairn's environment, so
    a repository's server could read the provider's key. They now get what shell commands get
    (cairn's secrets dropped, by name and by value) plus the ``env`` their entry names: a secret
    the entry passes on by name (``$CAIRN_SERVER_TOKEN``) is the user's explicit choice."""
    names = [*SECRET_NAMES, "CONFIGURED", "NAMED"]
    server = tools_server(tmp_path, MCP_TEST_REPORT_ENV=",".join(names))
    entry = server.stdio_config(trust=True)
    entry["env"] = {**entry["env"], "CONFIGURED": "from settings", "NAMED": "$CAIRN_SERVER_TOKEN"}
    _settings(project, {"tools": entry})
    scripted_server.enqueue(reply("Seen."))

    done = run_cairn("-p", "look", env=with_secrets(cairn_env, cairn_env["OPENAI_API_KEY"]))

    assert done.returncode == 0, done.stderr
    assert reported_environments(tmp_path) == [
        {**SECRETS_DROPPED, "CONFIGURED": "from settings", "NAMED": "daemon-token-123"}
    ]


def test_a_server_flooding_list_changed_notifications_leaves_a_clean_exit(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """#24 Low: 20,000 tools/list_changed notifications "took 67 s and printed RuntimeError:
    Event loop is closed at exit"."""
    raw = {"command": sys.executable, "args": [str(RAW_SERVER), "flood"], "trust": True}
    raw["env"] = {"MCP_TEST_LOG": str(tmp_path / "raw.log")}
    _settings(project, {"raw": raw})
    scripted_server.enqueue(tool_call("mcp__raw__broken", {}), reply("Flooded."), purpose="main")

    done = run_cairn("-p", "flood it", timeout=120)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Flooded."
    assert "Traceback" not in done.stderr and "Event loop is closed" not in done.stderr
    _, second = scripted_server.requests_for("main")
    assert _tool_messages(second) == ["flooded"]
    lists = (tmp_path / "raw.log").read_text().splitlines().count("tools/list")
    assert lists <= 3, lists
