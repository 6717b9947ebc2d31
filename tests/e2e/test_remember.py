"""``/remember`` end to end in real processes: ``cairn -p``, ``cairn --acp`` and ``cairn serve``
save a memory the user asks for, show it, and a new session recalls it (#16).

Before the fix the main agent's write was refused ("path is outside the allowed directories"):
its tools had no memory folder among their writable paths.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call

from ..memory.memory_helpers import unstamped
from .conftest import RunCairn, write_settings
from .test_acp_process import running_agent
from .test_daemon import serve, until

__all__ = ["serve"]  # the fixture, imported for pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

MARKER = "MARKER-REMEMBER-7070"
UV = (
    "---\nname: Prefers uv over pip\ndescription: the user installs Python packages with uv\n"
    f"type: feedback\n---\n\nUse `uv pip install`, never pip ({MARKER}).\n"
)
REMEMBER = "/remember I install Python packages with uv, never pip"
LATER = "how should I install the requests package with pip?"


@pytest.fixture
def memory_on(project: Path) -> Path:
    write_settings(project, {"memory": {"enableManagedAutoMemory": True}})
    return project


def saved_file(env: dict[str, str]) -> Path:
    return Path(env["CAIRN_HOME"]) / "memories" / "feedback" / "prefer-uv.md"


def model(target: Path) -> Any:
    """The main model saves the memory when asked to remember, answers otherwise; the memory
    agents save nothing; the selector chooses nothing (the fast phase does the recall)."""

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        if request.purpose != "main":
            return reply("Nothing to save.")
        answered = any(m.get("role") == "tool" for m in request.messages)
        if "remember this for future sessions" in request.last_user_text() and not answered:
            return tool_call("write_file", {"file_path": str(target), "content": UV})
        return reply("Saved." if answered else "Use uv pip install requests.")

    return handle


def assert_saved(target: Path, server: ScriptedServer, session_id: str | None = None) -> None:
    assert unstamped(target.read_text()) == UV
    index = (target.parent.parent / "MEMORY.md").read_text()
    assert "- [Prefers uv over pip](feedback/prefer-uv.md)" in index
    history = (target.parent.parent / ".history.jsonl").read_text().splitlines()
    assert [json.loads(line)["op"] for line in history] == ["remember"]
    extracts = server.requests_for("extract")
    assert [r for r in extracts if session_id in (None, r.session_id)] == []  # saved already


def assert_recalled(server: ScriptedServer) -> None:
    later = [r for r in server.requests_for("main") if LATER in r.last_user_text()]
    assert later and later[0].contains(MARKER)


def test_remember_in_cairn_p_then_a_new_process_recalls_it(
    memory_on: Path, run_cairn: RunCairn, cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    target = saved_file(cairn_env)
    scripted_server.handler = model(target)

    done = run_cairn("-p", REMEMBER)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Saved."
    assert f"[Saved to memory (/remember): Prefers uv over pip — {target}" in done.stderr
    assert "Permission" not in done.stderr  # no approval was needed in default mode
    assert_saved(target, scripted_server)

    again = run_cairn("-p", LATER)

    assert again.returncode == 0, again.stderr
    assert "[Recalled 1 memory: Prefers uv over pip]" in again.stderr
    assert_recalled(scripted_server)


async def test_remember_over_acp_shows_the_saved_memory_then_a_new_session_recalls_it(
    memory_on: Path, cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    target = saved_file(cairn_env)
    scripted_server.handler = model(target)
    async with running_agent(cairn_env, memory_on) as agent:
        agent.client.permission = "reject_once"  # an approval dialog would refuse the write
        first = await agent.start_session()
        response = await agent.prompt(first, REMEMBER)
        second = (await agent.conn.new_session(cwd=str(memory_on))).session_id
        await agent.prompt(second, LATER)

    assert response.stop_reason == "end_turn"
    assert agent.client.permission_requests == []
    assert_saved(target, scripted_server, first)
    memory = [meta for meta in _wire_meta(agent.client.wire) if meta.get("kind") == "memory"]
    changed = [m for m in memory if m["action"] == "changed"]
    assert [(m["operation"], m["saved"]) for m in changed] == [
        ("remember", ["feedback/prefer-uv.md"])
    ]
    assert changed[0]["memories"][0]["name"] == "Prefers uv over pip"
    recalled = [m for m in memory if m["action"] == "recalled"]
    assert [m["memories"][0]["path"] for m in recalled] == [str(target)]
    assert_recalled(scripted_server)


async def test_remember_over_the_daemon_shows_the_saved_memory_then_a_new_session_recalls_it(
    memory_on: Path, serve: Any, cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    target = saved_file(cairn_env)
    served = serve()
    scripted_server.handler = model(target)
    async with DaemonClient(served.url) as client:
        first = await DaemonSessionClient.create(client)
        await first.prompt(REMEMBER)
        events = await until(first, "turn_complete")
        second = await DaemonSessionClient.create(client)
        await second.prompt(LATER)
        later = await until(second, "turn_complete")

    assert_saved(target, scripted_server, first.session_id)
    changed = [e for e in events if _memory_meta(e).get("action") == "changed"]
    assert [_memory_meta(e)["saved"] for e in changed] == [["feedback/prefer-uv.md"]]
    assert "Saved to memory (/remember): Prefers uv over pip" in (changed[0].text or "")
    recalled = [e for e in later if _memory_meta(e).get("action") == "recalled"]
    assert [_memory_meta(e)["memories"][0]["name"] for e in recalled] == ["Prefers uv over pip"]
    assert_recalled(scripted_server)
    assert served.stop() == 0


async def test_a_memory_extract_saves_after_the_turn_reaches_the_daemon_client(
    memory_on: Path, serve: Any, cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    """Memory at work outside a turn: Extract saves after ``turn_complete``; the client is told."""
    target = saved_file(cairn_env)
    served = serve()
    write = tool_call("write_file", {"file_path": str(target), "content": UV})

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "extract":
            done = any(m.get("role") == "tool" for m in request.messages)
            return reply("Saved.") if done else write
        if request.purpose == "main":
            return reply("Noted, uv it is.")
        return reply(json.dumps({"selected_memories": []}))

    scripted_server.handler = handle
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt("I install Python packages with uv, never pip")
        seen: list[Any] = []
        async with contextlib.aclosing(session.events()) as stream:
            async for event in stream:
                seen.append(event)
                if _memory_meta(event).get("operation") == "extract":
                    break

    kinds = [e.type for e in seen]
    assert kinds.index("turn_complete") < len(kinds) - 1  # the change came after the turn
    assert _memory_meta(seen[-1])["saved"] == ["feedback/prefer-uv.md"]
    assert unstamped(target.read_text()) == UV
    assert served.stop() == 0


def _memory_meta(event: Any) -> dict[str, Any]:
    data = getattr(event, "data", None) or {}
    meta = data.get("_meta", {}) if isinstance(data, dict) else {}
    cairn = meta.get("cairn", {}) if isinstance(meta, dict) else {}
    return cairn if isinstance(cairn, dict) else {}


def _wire_meta(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for message in wire:
        update = message.get("params", {}).get("update", {})
        meta = update.get("_meta", {}).get("cairn") if isinstance(update, dict) else None
        if isinstance(meta, dict):
            found.append(meta)
    return found


TABS = (
    "---\nname: Indent with tabs\ndescription: The user always indents code with tabs\n"
    "type: feedback\n---\n\nIndent with tabs, never spaces.\n"
)
TABS_AGAIN = (
    "---\nname: Tabs for indentation\ndescription: The user indents with tabs\n"
    "type: feedback\n---\n\nAlways indent with tabs.\n"
)


def saving_tabs(target: Path) -> Any:
    """The main model saves the tabs rule on its own at every prompt; the forget selector
    picks the rule; the memory agents save nothing."""

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "forget":
            return reply(json.dumps({"selected_ids": ["user:feedback/tabs.md"]}))
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        if request.purpose != "main":
            return reply("Nothing to save.")
        if request.messages[-1].get("role") == "tool":
            return reply("Done.")
        return tool_call("write_file", {"file_path": str(target), "content": TABS_AGAIN})

    return handle


def test_a_fact_forgotten_by_cairn_memory_forget_is_not_saved_again_by_the_agent_on_its_own(
    memory_on: Path, run_cairn: RunCairn, cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    """``cairn memory forget`` in one process, then ``cairn -p`` whose model saves the rule on
    its own: refused (the tombstone stays) until a prompt written after the forget states the
    rule again."""
    root = Path(cairn_env["CAIRN_HOME"]) / "memories"
    (root / "feedback").mkdir(parents=True)
    (root / "feedback" / "tabs.md").write_text(TABS)
    target = root / "feedback" / "tabs-again.md"
    scripted_server.handler = saving_tabs(target)

    forgot = run_cairn("memory", "forget", "the tabs rule", "--yes")
    assert forgot.returncode == 0, forgot.stderr
    assert not (root / "feedback" / "tabs.md").exists()

    done = run_cairn("-p", "--yolo", "Let's look at the parser.")

    assert done.returncode == 0, done.stderr
    assert not target.exists()
    assert "Indent with tabs" in (root / ".forgotten.jsonl").read_text()
    main = scripted_server.requests_for("main")
    [refused] = [r for r in main if r.messages[-1]["role"] == "tool"]
    assert refused.contains("not saved: the user asked to forget this on ")
    assert refused.contains("ask them first")

    again = run_cairn("-p", "--yolo", "I do always indent with tabs, keep that in mind.")

    assert again.returncode == 0, again.stderr
    assert unstamped(target.read_text()) == TABS_AGAIN
    assert not (root / ".forgotten.jsonl").exists()
