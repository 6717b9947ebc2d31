"""The model picker end to end: real ``cairn --acp``, ``cairn serve`` and ``cairn -p`` processes
against the scripted model server, with ``model.available`` in the project's settings.

What is checked is what crosses the process boundaries: ACP ``configOptions`` and
``config_option_update`` notifications, the daemon's model route and event stream, and the model
(and endpoint) each request reached. The ACP tests that need no environment or process of their
own share one ``cairn --acp``, each with its own project, sessions, client and script
(tests/e2e/acp_shared.py says why that is sound).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from acp.exceptions import RequestError
from acp.schema import ClientCapabilities, TextContentBlock
from acp.stdio import spawn_agent_process

from cairn.sdk import DaemonClient, DaemonHTTPError
from cairn.testing import ScriptedServer, reply
from cairn.testing.fixtures import TEST_MODEL, isolated_env

from .acp_shared import SharedAgent, module_server, scripted_server, shared_agent
from .conftest import ACP_SHUTDOWN, CAIRN, trust_in_user_settings, write_settings
from .test_daemon import serve, until

__all__ = ["module_server", "scripted_server", "serve"]  # fixtures, imported for pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(90),
    pytest.mark.xdist_group("model_picker"),  # one worker: the shared agent starts once
]
on_the_shared_agent = pytest.mark.asyncio(loop_scope="module")  # the loop its connection runs on

OTHER_KEY = "other-endpoint-key"


def available(other: ScriptedServer | None = None) -> list[Any]:
    models: list[Any] = [
        TEST_MODEL,
        {"id": "big-model", "name": "Big model", "description": "Slow and thorough"},
    ]
    if other is not None:
        models.append(
            {
                "id": "claude-elsewhere",
                "name": "Claude (Messages API)",
                "authType": "anthropic",
                "baseUrl": other.base_url,
                "envKey": "OTHER_ENDPOINT_KEY",
            }
        )
    return models


@pytest.fixture
def other_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(reply("From the other endpoint.")) as server:
        yield server


def picker_settings(project: Path, models: Any, cairn_home: Path | None = None) -> None:
    write_settings(
        project, {"memory": {"enableManagedAutoMemory": False}, "model": {"available": models}}
    )
    # an entry served elsewhere needs the folder trusted
    trust_in_user_settings(project, cairn_home)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared(
    module_server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[SharedAgent]:
    """``cairn --acp`` as ``acp_agent`` starts it, in a project no test uses."""
    root = tmp_path_factory.mktemp("model-picker")
    folder = root / "project"
    (folder / ".git").mkdir(parents=True)
    write_settings(folder, {"memory": {"enableManagedAutoMemory": False}})
    async with shared_agent(
        CAIRN,
        server=module_server,
        env=isolated_env(module_server.base_url, root),
        cwd=folder,
        stderr=root / "agent-stderr.txt",
        transport=ACP_SHUTDOWN,
    ) as agent:
        yield agent


@contextlib.asynccontextmanager
async def shared_acp_agent(agent: SharedAgent, project: Path) -> AsyncIterator[tuple[Any, Editor]]:
    """``acp_agent`` on the shared agent: this test's sessions and editor."""
    editor = Editor()
    async with agent.attach(project, client=editor) as sessions:
        yield sessions.conn, editor


def shared_home(agent: SharedAgent) -> Path:
    return Path(agent.env["CAIRN_HOME"])


class Editor:
    """An ACP client that keeps the session updates it was sent."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **_kw: Any) -> None:
        self.updates.append(update)

    def config_updates(self) -> list[Any]:
        return [u for u in self.updates if u.session_update == "config_option_update"]


@contextlib.asynccontextmanager
async def acp_agent(env: dict[str, str], project: Path) -> AsyncIterator[tuple[Any, Editor]]:
    editor = Editor()
    async with spawn_agent_process(
        editor, *CAIRN, "--acp", env=env, cwd=project, transport_kwargs=ACP_SHUTDOWN
    ) as (conn, _):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        yield conn, editor


def menu(options: list[Any], option_id: str) -> Any:
    return next(o.root if hasattr(o, "root") else o for o in options if _id(o) == option_id)


def _id(option: Any) -> str:
    return str((option.root if hasattr(option, "root") else option).id)


async def prompt(conn: Any, session_id: str, text: str) -> Any:
    return await conn.prompt(
        session_id=session_id, prompt=[TextContentBlock(type="text", text=text)]
    )


# ----- ACP -----


@on_the_shared_agent
async def test_acp_lists_the_models_and_a_switch_reaches_the_next_request(
    scripted_server: ScriptedServer, shared: SharedAgent, project: Path
) -> None:
    picker_settings(project, available(), shared_home(shared))
    scripted_server.default = reply("ok")
    async with shared_acp_agent(shared, project) as (conn, _editor):
        session = await conn.new_session(cwd=str(project))
        other = await conn.new_session(cwd=str(project))
        switched = await conn.set_config_option(
            config_id="model", session_id=session.session_id, value="big-model"
        )
        await prompt(conn, session.session_id, "hello")
        await prompt(conn, other.session_id, "hello")

    model = menu(session.config_options, "model")
    assert (model.category, model.type, model.current_value) == ("model", "select", TEST_MODEL)
    assert [(o.value, o.name, o.description) for o in model.options] == [
        (TEST_MODEL, TEST_MODEL, None),
        ("big-model", "Big model", "Slow and thorough"),
    ]
    mode = menu(session.config_options, "mode")
    assert mode.current_value == "default"
    assert [o.value for o in mode.options] == ["plan", "default", "auto-edit", "yolo"]
    assert menu(switched.config_options, "model").current_value == "big-model"
    first, second = scripted_server.requests_for("main")
    assert (first.session_id, first.body["model"]) == (session.session_id, "big-model")
    assert (second.session_id, second.body["model"]) == (other.session_id, TEST_MODEL)


@on_the_shared_agent
async def test_acp_switches_the_approval_mode_and_typed_model_commands_update_the_menus(
    scripted_server: ScriptedServer, shared: SharedAgent, project: Path
) -> None:
    picker_settings(project, available(), shared_home(shared))
    async with shared_acp_agent(shared, project) as (conn, editor):
        session = await conn.new_session(cwd=str(project))
        answer = await conn.set_config_option(
            config_id="mode", session_id=session.session_id, value="auto-edit"
        )
        await prompt(conn, session.session_id, "/model big-model")
        with pytest.raises(RequestError) as unknown:
            await conn.set_config_option(
                config_id="temperature", session_id=session.session_id, value="hot"
            )
        with pytest.raises(RequestError) as bad_mode:
            await conn.set_config_option(
                config_id="mode", session_id=session.session_id, value="reckless"
            )

    assert menu(answer.config_options, "mode").current_value == "auto-edit"
    updates = editor.config_updates()
    assert [menu(u.config_options, "mode").current_value for u in updates] == [
        "auto-edit",
        "auto-edit",
    ]
    assert menu(updates[-1].config_options, "model").current_value == "big-model"
    assert "unknown config option 'temperature'" in str(unknown.value.data)
    assert "unknown approval mode 'reckless'" in str(bad_mode.value.data)
    assert scripted_server.requests_for("main") == []


async def test_acp_a_model_served_by_another_endpoint_gets_its_requests(
    scripted_server: ScriptedServer,
    other_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
) -> None:
    picker_settings(project, available(other_server))
    env = {**cairn_env, "OTHER_ENDPOINT_KEY": OTHER_KEY}
    async with acp_agent(env, project) as (conn, editor):
        session = await conn.new_session(cwd=str(project))
        await conn.set_config_option(
            config_id="model", session_id=session.session_id, value="claude-elsewhere"
        )
        await prompt(conn, session.session_id, "hello")

    assert scripted_server.requests_for("main") == []
    [request] = other_server.requests_for("main")
    assert (request.wire, request.path, request.body["model"]) == (
        "anthropic",
        "/v1/messages",
        "claude-elsewhere",
    )
    assert request.headers["x-api-key"] == OTHER_KEY
    texts = [u.content.text for u in editor.updates if u.session_update == "agent_message_chunk"]
    assert "".join(texts) == "From the other endpoint."


@on_the_shared_agent
async def test_acp_marks_a_model_whose_key_is_not_set_and_says_why(
    scripted_server: ScriptedServer,
    other_server: ScriptedServer,
    shared: SharedAgent,
    project: Path,
) -> None:
    """Issue #30: the menu listed an entry whose key was not set as any other, and choosing it
    answered -32602. Its name now says it cannot be chosen and its description why."""
    picker_settings(project, available(other_server), shared_home(shared))
    assert "OTHER_ENDPOINT_KEY" not in shared.env
    async with shared_acp_agent(shared, project) as (conn, _editor):
        session = await conn.new_session(cwd=str(project))
        with pytest.raises(RequestError) as refused:
            await conn.set_config_option(
                config_id="model", session_id=session.session_id, value="claude-elsewhere"
            )

    options = {o.value: o for o in menu(session.config_options, "model").options}
    unset = options["claude-elsewhere"]
    assert unset.name == "Claude (Messages API) (not available)"
    assert unset.description == (
        "Cannot be chosen: model.available entry 'claude-elsewhere' needs its key in the "
        "environment variable OTHER_ENDPOINT_KEY"
    )
    assert options["big-model"].name == "Big model"  # the others as they were
    assert "OTHER_ENDPOINT_KEY" in str(refused.value.data)


async def test_acp_auto_reads_the_endpoint_model_list_once(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    scripted_server.models = ["listed-a", "listed-b"]
    picker_settings(project, "auto")
    async with acp_agent(cairn_env, project) as (conn, _editor):
        first = await conn.new_session(cwd=str(project))
        await conn.new_session(cwd=str(project))

    values = [o.value for o in menu(first.config_options, "model").options]
    assert values == ["listed-a", "listed-b", TEST_MODEL]
    lists = [r for r in scripted_server.other_requests if r.method == "GET"]
    assert [r.path for r in lists] == ["/v1/models"]


# ----- the daemon -----


async def test_the_daemon_lists_and_sets_a_session_model_through_the_sdk(
    serve: Any, scripted_server: ScriptedServer, project: Path
) -> None:
    picker_settings(project, available())
    url = serve().url
    async with DaemonClient(url) as client:
        info = await client.create_session()
        session = client.session(info.session_id)
        before = await session.models()
        switched = await session.set_model("big-model")
        await session.prompt("hello")
        events = await until(session, "turn_complete")
        after = await session.models()
        status = await session.status()
        with pytest.raises(DaemonHTTPError) as blank:
            await session.set_model("  ")

    assert info.model == TEST_MODEL
    assert [o["id"] for o in info.raw["configOptions"]] == ["model", "mode"]
    assert before.current == TEST_MODEL
    assert [(m.model_id, m.name) for m in before.available] == [
        (TEST_MODEL, TEST_MODEL),
        ("big-model", "Big model"),
    ]
    assert switched == {
        "sessionId": info.session_id,
        "modelId": "big-model",
        "previous": TEST_MODEL,
    }
    assert after.current == status["model"] == "big-model"
    [request] = scripted_server.requests_for("main")
    assert request.body["model"] == "big-model"
    config = [e for e in events if e.update_kind == "config_option_update"]
    assert config and config[0].data["configOptions"][0]["currentValue"] == "big-model"
    assert (blank.value.status, blank.value.code) == (400, "invalid_model")


async def test_the_daemon_refuses_a_model_whose_endpoint_key_is_missing(
    serve: Any, scripted_server: ScriptedServer, other_server: ScriptedServer, project: Path
) -> None:
    picker_settings(project, available(other_server))
    url = serve().url
    async with DaemonClient(url) as client:
        info = await client.create_session()
        with pytest.raises(DaemonHTTPError) as refused:
            await client.set_model(info.session_id, "claude-elsewhere")
        models = await client.list_models(info.session_id)

    assert refused.value.status == 400
    assert "OTHER_ENDPOINT_KEY" in str(refused.value)
    assert models.current == TEST_MODEL


# ----- headless -----


def test_headless_model_lists_the_models(
    cairn_env: dict[str, str], scripted_server: ScriptedServer, project: Path
) -> None:
    picker_settings(project, available())

    done = subprocess.run(
        [*CAIRN, "-p", "/model"],
        cwd=project,
        env=cairn_env,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert "* 1. " + TEST_MODEL in done.stdout + done.stderr
    assert "2. Big model (big-model) — Slow and thorough" in done.stdout + done.stderr
    assert scripted_server.requests == []
