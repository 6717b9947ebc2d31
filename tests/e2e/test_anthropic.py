"""cairn over the Anthropic Messages wire, end to end, against the scripted server.

The server speaks the Messages API on ``/v1/messages`` and checks requests as strictly as the
real API (calls answered by results, thinking signatures it issued, no sampling with thinking),
so a request cairn gets wrong fails here as it would against Anthropic.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from cairn.config.endpoint import Endpoint
from cairn.config.settings import Settings
from cairn.llm.structured import RESPOND_TOOL
from cairn.recap.service import generate_session_recap
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest
from cairn.testing import RecordedRequest, Reply, ScriptedServer, error_reply, reply, tool_call
from cairn.vocabulary.events import SessionEvent

from .conftest import CAIRN, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

_MANIFEST_PATH = re.compile(r"^- \[\w+\] (\S+\.md) \(", re.MULTILINE)


def run(env: dict[str, str], project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CAIRN, *args], cwd=project, env=env, input="", capture_output=True, text=True, timeout=90
    )


def test_a_tool_call_turn_with_thinking_and_an_overload_runs_over_the_messages_api(
    anthropic_env: dict[str, str], scripted_server: ScriptedServer, project: Path
) -> None:
    (project / "notes.txt").write_text("the answer is 42\n")
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "model": {"generationConfig": {"thinkingBudget": 2048}},
        },
    )
    thinking_call = Reply(
        reasoning="The file should say.",
        tool_calls=tool_call("read_file", {"file_path": "notes.txt"}).tool_calls,
    )
    scripted_server.enqueue(
        error_reply(529, "Overloaded", retry_after=0), thinking_call, reply("It is 42.")
    )

    done = run(anthropic_env, project, "-p", "what is the answer in notes.txt?")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is 42.\n"
    assert "retrying in 0 s (attempt 2 of 7): HTTP 529: Overloaded" in done.stderr
    _overloaded, first, second = scripted_server.requests
    assert all(r.wire == "anthropic" and r.path == "/v1/messages" for r in (first, second))
    assert first.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assistant = second.body["messages"][-2]
    assert assistant["role"] == "assistant"
    thinking, call = assistant["content"]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "The file should say."
    assert thinking["signature"].startswith("sig-")  # the server checked it issued it
    assert call["type"] == "tool_use" and call["name"] == "read_file"
    result = second.body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "the answer is 42" in result["content"]


def test_the_recall_selector_side_query_is_answered_by_a_forced_tool_call(
    anthropic_env: dict[str, str], scripted_server: ScriptedServer, project: Path
) -> None:
    memory = project / ".cairn" / "memory" / "project"
    memory.mkdir(parents=True)
    (memory / "style.md").write_text(
        "---\nname: house style\ndescription: formatting preferences\ntype: project\n---\n\n"
        "MARKER-TABS: tabs, never spaces.\n"
    )
    # Lexical candidates only: the selector must settle within the first call's 1 s.
    lexical = {"enableManagedAutoMemory": True, "semanticCandidates": False}
    write_settings(project, {"memory": lexical})

    def answer(request: RecordedRequest) -> Reply | None:
        if request.purpose == "recall-selector":
            paths = _MANIFEST_PATH.findall(request.last_user_text())
            return tool_call(RESPOND_TOOL, {"selected_memories": paths})
        return None if request.purpose == "main" else reply("nothing to save")

    scripted_server.handler = answer
    # The selector settles while the first call runs; its pick goes with the tool result.
    look = tool_call("list_directory", {"path": "."})
    scripted_server.enqueue(
        Reply(tool_calls=look.tool_calls, delay=1.0), reply("Tabs."), purpose="main"
    )
    env = {**anthropic_env, "CAIRN_MEMORY_LOCAL": "1"}

    done = run(env, project, "-p", "what indentation do we use?")

    assert done.returncode == 0, done.stderr
    [select] = scripted_server.requests_for("recall-selector")
    assert select.wire == "anthropic"
    assert select.body["tool_choice"] == {"type": "tool", "name": RESPOND_TOOL}
    _first, second = scripted_server.requests_for("main")
    assert second.contains("MARKER-TABS")  # the selector's pick reached the model


async def test_a_recap_is_written_through_the_anthropic_provider(
    scripted_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    settings = Settings.model_validate({"memory": {"enableManagedAutoMemory": False}})
    endpoint = Endpoint(scripted_server.base_url, "k", "claude-test", wire="anthropic")
    runtime = Runtime.from_endpoint(cwd=tmp_path, settings=settings, endpoint=endpoint)
    session = runtime.new_session()
    scripted_server.enqueue(reply("Looking at auth.py now."), purpose="main")
    scripted_server.enqueue(reply("<recap>Fixing login. Next: run tests.</recap>"), purpose="recap")

    async def ignore(event: SessionEvent) -> None:
        return None

    await session.prompt(PromptRequest("fix the login bug"), ignore)
    recap = await generate_session_recap(session)
    await session.close()
    await runtime.aclose()

    assert recap == "Fixing login. Next: run tests."
    [request] = scripted_server.requests_for("recap")
    assert request.wire == "anthropic"
    assert request.body["max_tokens"] == 300
    assert "tools" not in request.body
    assert json.dumps(request.body).count("fix the login bug") == 1
