"""Approval of MCP tool calls through the real scheduler, against a real MCP server.

Tests that only call tools share one server a module (one untrusted, one trusted, and another
untrusted one for the tests that need it untrusted): starting one costs a Python process
importing the MCP SDK. The calls that reach it carry texts no other test
sends, so what one test finds in the server's log is its own."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
import pytest_asyncio

from cairn.abort import AbortSignal
from cairn.content import FunctionCall
from cairn.mcp.manager import SessionMcp
from cairn.tools.base import ToolContext
from cairn.tools.permissions import PLAN_MODE_MESSAGE, PermissionRules
from cairn.tools.registry import ToolRegistry
from cairn.tools.scheduler import ToolScheduler
from cairn.vocabulary.events import SessionEvent
from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest, Question

from .helpers import server_log, stdio_config, tools_server

pytestmark = pytest.mark.slow
on_the_shared_servers = pytest.mark.asyncio(loop_scope="module")  # the loop the servers run on


class User:
    """The person at the keyboard: answers every permission request with ``answer``."""

    interactive = True

    def __init__(self, answer: PermissionOutcome) -> None:
        self.answer = answer
        self.asked: list[PermissionRequest] = []

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        self.asked.append(request)
        return self.answer

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        return None


@pytest_asyncio.fixture(
    scope="module", loop_scope="module", params=[False, True], ids=["untrusted", "trusted"]
)
async def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[SessionMcp]:
    folder = tmp_path_factory.mktemp("mcp-server")
    config = stdio_config(tools_server(folder), trust=request.param)
    view = SessionMcp(None, [config], cwd=folder)
    view.start()
    assert await view.wait_for_discovery(30) == []
    yield view
    await view.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def untrusted(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SessionMcp]:
    """One untrusted server for the tests that ask about calls to it (``servers`` runs each
    test against a trusted server too)."""
    folder = tmp_path_factory.mktemp("mcp-untrusted")
    view = SessionMcp(None, [stdio_config(tools_server(folder))], cwd=folder)
    view.start()
    assert await view.wait_for_discovery(30) == []
    yield view
    await view.aclose()


def logged_by(servers: SessionMcp) -> list[str]:
    """What the shared server wrote to its log."""
    return server_log(Path(servers.connections[0].config.env["MCP_TEST_LOG"]).parent)


async def _run(
    servers: SessionMcp,
    tmp_path: Path,
    tool: str,
    args: dict[str, object],
    *,
    mode: str = "default",
    answer: PermissionOutcome = "allow_once",
    rules: PermissionRules | None = None,
) -> tuple[str, str, User]:
    user = User(answer)
    scheduler = ToolScheduler(
        registry=ToolRegistry(servers.tools([])),
        rules=rules or PermissionRules(),
        frontend=user,
        approval_mode=lambda: mode,
    )
    events: list[SessionEvent] = []

    async def emit(event: SessionEvent) -> None:
        events.append(event)

    ctx = ToolContext(workspace=tmp_path, abort=AbortSignal())
    [outcome] = await scheduler.run([FunctionCall("c1", tool, args)], ctx, emit)
    return outcome.status, outcome.response.text, user


@on_the_shared_servers
async def test_a_tool_that_changes_things_asks_unless_the_server_is_trusted(
    servers: SessionMcp, tmp_path: Path
) -> None:
    status, text, user = await _run(servers, tmp_path, "mcp__tools__write_note", {"text": "a"})
    assert (status, text) == ("completed", "saved note: a")
    trusted = servers.connections[0].config.trust
    assert len(user.asked) == (0 if trusted else 1)
    if not trusted:
        assert user.asked[0].tool_name == "mcp__tools__write_note"
        assert user.asked[0].confirmation == "mcp"


@on_the_shared_servers
async def test_a_declined_call_does_not_reach_the_server(
    untrusted: SessionMcp, tmp_path: Path
) -> None:
    status, _, user = await _run(
        untrusted, tmp_path, "mcp__tools__write_note", {"text": "no"}, answer="reject"
    )
    assert status == "rejected" and len(user.asked) == 1
    assert "note no" not in logged_by(untrusted)


@on_the_shared_servers
@pytest.mark.parametrize("mode", ["auto-edit", "plan", "yolo"])
async def test_a_read_only_tool_runs_unasked_in_auto_edit_plan_and_yolo(
    servers: SessionMcp, tmp_path: Path, mode: str
) -> None:
    status, text, user = await _run(servers, tmp_path, "mcp__tools__echo", {"text": "x"}, mode=mode)
    assert (status, text, user.asked) == ("completed", "echo: x", [])


@on_the_shared_servers
async def test_a_read_only_tool_asks_in_default_mode_on_an_untrusted_server(
    servers: SessionMcp, tmp_path: Path
) -> None:
    _, _, user = await _run(servers, tmp_path, "mcp__tools__echo", {"text": "x"})
    assert len(user.asked) == (0 if servers.connections[0].config.trust else 1)


@on_the_shared_servers
async def test_plan_mode_never_runs_a_tool_that_may_change_things(
    servers: SessionMcp, tmp_path: Path
) -> None:
    allow_all = PermissionRules.parse(allow=["mcp__tools__*"])
    status, text, user = await _run(
        servers, tmp_path, "mcp__tools__write_note", {"text": "p"}, mode="plan", rules=allow_all
    )
    done, _, _ = await _run(
        servers, tmp_path, "mcp__tools__write_note", {"text": "p2"}, mode="yolo", rules=allow_all
    )

    assert (status, text, user.asked) == ("failed", PLAN_MODE_MESSAGE, [])
    assert done == "completed" and "note p2" in logged_by(servers)  # the log shows what ran
    assert "note p" not in logged_by(servers)


@on_the_shared_servers
@pytest.mark.parametrize("rule", ["mcp__tools__*", "mcp__tools", "mcp__tools__write_note"])
async def test_an_allow_rule_on_the_full_name_or_the_server_skips_the_question(
    untrusted: SessionMcp, tmp_path: Path, rule: str
) -> None:
    rules = PermissionRules.parse(allow=[rule])
    status, _, user = await _run(
        untrusted, tmp_path, "mcp__tools__write_note", {"text": "r"}, rules=rules
    )
    assert (status, user.asked) == ("completed", [])


@on_the_shared_servers
async def test_a_deny_rule_on_the_full_name_refuses_the_call(
    servers: SessionMcp, tmp_path: Path
) -> None:
    rules = PermissionRules.parse(deny=["mcp__tools__write_note"])
    status, text, _ = await _run(
        servers, tmp_path, "mcp__tools__write_note", {"text": "d"}, mode="yolo", rules=rules
    )
    assert status == "failed"
    assert text == (
        "Permission denied: this mcp__tools__write_note call matches the permissions.deny rule "
        '"mcp__tools__write_note".'
    )


def test_a_rule_for_another_server_does_not_cover_a_similar_prefix() -> None:
    rules = PermissionRules.parse(allow=["mcp__git"])
    assert rules.decide("mcp__github__get_issue", {}, Path(".")) is None
    assert rules.decide("mcp__git__log", {}, Path(".")) == "allow"
