"""MCP servers passed in by clients: the real ``cairn --acp`` (session/new) and ``cairn serve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from acp.schema import TextContentBlock

from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import ScriptedServer, reply, tool_call
from cairn.testing.mcp import pid_alive

from ..mcp.helpers import patient_discovery, server_log, tools_server
from .test_acp_process import running_agent
from .test_daemon import serve as serve_fixture
from .test_daemon import until

serve = serve_fixture  # the fixture, under the name the tests ask for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _tool_messages(request: Any) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


@pytest.fixture(autouse=True)
def _servers_may_take_their_time(cairn_env: dict[str, str]) -> None:
    patient_discovery(Path(cairn_env["CAIRN_HOME"]))


@pytest.fixture
def acp_project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    (folder / ".cairn").mkdir()
    (folder / ".cairn" / "settings.json").write_text(
        json.dumps({"memory": {"enableManagedAutoMemory": False}})
    )
    return folder


async def test_acp_runs_the_editors_servers_asks_approval_and_lists_prompts(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], acp_project: Path, tmp_path: Path
) -> None:
    stdio_server = tools_server(tmp_path)
    (tmp_path / "http").mkdir()
    http_server = tools_server(tmp_path / "http")
    scripted_server.enqueue(tool_call("mcp__editor__write_note", {"text": "zed"}), purpose="main")
    scripted_server.enqueue(tool_call("mcp__web__echo", {"text": "over http"}), purpose="main")
    scripted_server.enqueue(reply("Both done."), purpose="main")
    with http_server.serve_http() as running:
        async with running_agent(cairn_env, acp_project) as agent:
            init = await agent.conn.initialize(protocol_version=1)
            servers = [
                stdio_server.acp_stdio_config("editor"),
                {"name": "web", **running.acp_config},
            ]
            session = await agent.conn.new_session(cwd=str(acp_project), mcp_servers=servers)
            response = await agent.conn.prompt(
                session_id=session.session_id,
                prompt=[TextContentBlock(type="text", text="note it")],
            )
            commands = [
                [c.name for c in u.available_commands]
                for u in agent.client.updates
                if getattr(u, "session_update", "") == "available_commands_update"
            ]
        pids = stdio_server.pids()

    caps = init.agent_capabilities.mcp_capabilities
    assert (caps.http, caps.sse) == (True, True)
    assert response.stop_reason == "end_turn"
    asked = [call.title for call, _ in agent.client.permission_requests]
    assert asked == ["write_note (editor MCP)", "echo (web MCP)"]  # untrusted: both ask
    _, second, third = scripted_server.requests_for("main")
    assert _tool_messages(second) == ["saved note: zed"]
    assert _tool_messages(third)[-1] == "echo: over http"
    assert any("mcp__editor__review" in names for names in commands)
    assert pids and not any(pid_alive(pid) for pid in pids)


async def test_an_untrusted_folders_servers_do_not_start_but_the_editors_do(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], acp_project: Path, tmp_path: Path
) -> None:
    """An untrusted project's own servers (settings and .mcp.json) never start under ACP, and
    the agent says once how to trust the folder; the servers the editor passes still run."""
    (tmp_path / "project-servers").mkdir()
    own = tools_server(tmp_path / "project-servers")
    settings = json.loads((acp_project / ".cairn" / "settings.json").read_text())
    settings["mcpServers"] = {"local": own.stdio_config(trust=True)}
    (acp_project / ".cairn" / "settings.json").write_text(json.dumps(settings))
    shared = {"mcpServers": {"shared": own.stdio_config()}}
    (acp_project / ".mcp.json").write_text(json.dumps(shared))
    editors = tools_server(tmp_path)
    scripted_server.default = reply("Answered.")
    async with running_agent(cairn_env, acp_project) as agent:
        await agent.conn.initialize(protocol_version=1)
        session = await agent.conn.new_session(
            cwd=str(acp_project), mcp_servers=[editors.acp_stdio_config("editor")]
        )
        await agent.conn.prompt(
            session_id=session.session_id, prompt=[TextContentBlock(type="text", text="hi")]
        )
    stderr = (acp_project.parent / "agent-stderr.txt").read_text()

    offered = scripted_server.requests_for("main")[0].tool_names
    assert "mcp__editor__echo" in offered
    assert not [name for name in offered if name.startswith(("mcp__local__", "mcp__shared__"))]
    assert own.pids() == [] and server_log(tmp_path / "project-servers") == []
    assert stderr.count("not a trusted folder") == 1 and "`cairn trust`" in stderr
    assert editors.pids() and not any(pid_alive(pid) for pid in editors.pids())


async def test_session_load_starts_the_servers_it_carries(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], acp_project: Path, tmp_path: Path
) -> None:
    """A session loaded in a new agent process gets the servers the editor passes in
    session/load (as session/new does); they are gone when the agent exits."""
    server = tools_server(tmp_path)
    scripted_server.enqueue(reply("First."), purpose="main")
    scripted_server.enqueue(tool_call("mcp__editor__echo", {"text": "loaded"}), purpose="main")
    scripted_server.enqueue(reply("Echoed."), purpose="main")
    async with running_agent(cairn_env, acp_project) as agent:
        await agent.conn.initialize(protocol_version=1)
        session = await agent.conn.new_session(cwd=str(acp_project), mcp_servers=[])
        await agent.conn.prompt(
            session_id=session.session_id, prompt=[TextContentBlock(type="text", text="hi")]
        )
    assert server.pids() == []

    async with running_agent(cairn_env, acp_project) as agent:
        await agent.conn.initialize(protocol_version=1)
        await agent.conn.load_session(
            cwd=str(acp_project),
            session_id=session.session_id,
            mcp_servers=[server.acp_stdio_config("editor")],
        )
        await agent.conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        await agent.conn.prompt(
            session_id=session.session_id, prompt=[TextContentBlock(type="text", text="echo")]
        )

    *_, last = scripted_server.requests_for("main")
    assert _tool_messages(last)[-1] == "echo: loaded"
    assert server.pids() and not any(pid_alive(pid) for pid in server.pids())


async def test_a_call_the_editor_declines_never_reaches_the_server(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], acp_project: Path, tmp_path: Path
) -> None:
    server = tools_server(tmp_path)
    scripted_server.enqueue(tool_call("mcp__editor__write_note", {"text": "no"}), purpose="main")
    scripted_server.enqueue(reply("Understood."), purpose="main")
    async with running_agent(cairn_env, acp_project) as agent:
        agent.client.permission = "reject_once"
        await agent.conn.initialize(protocol_version=1)
        session = await agent.conn.new_session(
            cwd=str(acp_project), mcp_servers=[server.acp_stdio_config("editor")]
        )
        for text in ("note", "ok, never mind"):
            await agent.conn.prompt(
                session_id=session.session_id, prompt=[TextContentBlock(type="text", text=text)]
            )
    assert len(agent.client.permission_requests) == 1
    [_, second] = scripted_server.requests_for("main")  # the decline ended the first turn
    assert "declined" in _tool_messages(second)[0]
    assert "note no" not in server_log(tmp_path)


async def test_acp_refuses_a_malformed_server_list_with_invalid_params(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], acp_project: Path
) -> None:
    from acp.exceptions import RequestError

    async with running_agent(cairn_env, acp_project) as agent:
        await agent.conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as error:
            await agent.conn._conn.send_request(  # a raw request: the SDK would validate it
                "session/new",
                {
                    "cwd": str(acp_project),
                    "mcpServers": [{"name": "x", "command": "", "args": [], "env": []}],
                },
            )
    assert error.value.code == -32602
    assert "`command` must be a non-empty string" in json.dumps(error.value.data)


async def test_the_daemon_starts_the_servers_a_client_passes_to_post_session(
    serve: object, scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    server = tools_server(tmp_path)
    token = "mcp-token"  # yolo widens permissions: a token-less daemon refuses it
    served = serve("--token", token)  # type: ignore[operator]
    auth = {"Authorization": f"Bearer {token}"}
    scripted_server.enqueue(tool_call("mcp__notes__echo", {"text": "daemon"}), purpose="main")
    scripted_server.enqueue(reply("Echoed."), purpose="main")
    async with DaemonClient(served.url, token) as client:
        session = await DaemonSessionClient.create(
            client, approval_mode="yolo", mcp_servers=[server.acp_stdio_config("notes")]
        )
        await session.prompt("echo it")
        events = await until(session, "turn_complete")
        commands = httpx.get(
            f"{served.url}/session/{session.session_id}/commands", headers=auth
        ).json()
        bad = httpx.post(
            f"{served.url}/session", json={"mcpServers": [{"name": "x"}]}, headers=auth
        )
        await client.close_session(session.session_id)

    assert events[-1].final_text == "Echoed."
    _, second = scripted_server.requests_for("main")
    assert _tool_messages(second) == ["echo: daemon"]
    assert bad.status_code == 400 and "mcpServers[0]" in bad.text
    assert "mcp__notes__review" in [c["name"] for c in commands["commands"]]
    assert "start" in " ".join(server_log(tmp_path))
    assert served.stop() == 0
    assert server.pids() and not any(pid_alive(pid) for pid in server.pids())


NOISE_MARKER = "MARKER-NOISE-4242"


@pytest.mark.parametrize("used_the_tool", [True, False], ids=["tool-used", "tool-not-used"])
async def test_mcp_tool_use_feeds_recalls_noise_filter_and_extract_gets_no_mcp_tools(
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    tmp_path: Path,
    used_the_tool: bool,
) -> None:
    from .test_acp_process import selector

    project = tmp_path / "project"
    memory = project / ".cairn" / "memory" / "project"
    memory.mkdir(parents=True)
    (project / ".git").mkdir()
    (memory / "notes.md").write_text(
        "---\nname: write_note parameter schema\ndescription: how to call write_note\n"
        f"type: reference\n---\n\n{NOISE_MARKER}: the write_note parameter schema is text.\n"
    )
    server = tools_server(tmp_path)
    scripted_server.handler = selector()
    scripted_server.default = reply("Nothing to save.")
    first_turn = (
        [tool_call("mcp__tools__write_note", {"text": "x"}), reply("Saved.")]
        if used_the_tool
        else [reply("Hello.")]
    )
    scripted_server.enqueue(*first_turn, reply("Answered."), purpose="main")
    env = {**cairn_env, "CAIRN_MEMORY_LOCAL": "1"}
    async with running_agent(env, project) as agent:
        await agent.conn.initialize(protocol_version=1)
        servers = [{**server.acp_stdio_config("tools")}]
        session = await agent.conn.new_session(cwd=str(project), mcp_servers=servers)
        await agent.conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        for text in ("hi", "what is the write_note parameter schema?"):
            await agent.conn.prompt(
                session_id=session.session_id, prompt=[TextContentBlock(type="text", text=text)]
            )

    last = scripted_server.requests_for("main")[-1]
    recalled = NOISE_MARKER in json.dumps(last.messages[-1])  # the second turn's own prompt
    assert recalled is (not used_the_tool)
    for request in scripted_server.requests_for("extract"):
        assert not [t for t in request.tools if t["function"]["name"].startswith("mcp__")]
    assert scripted_server.requests_for("extract"), "Extract ran"
