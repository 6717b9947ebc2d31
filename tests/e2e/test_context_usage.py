"""What fills the context and what each purpose cost, from every front end: ``cairn -p -o json``
(the result message), ``cairn -p /context`` (the command's text), and the daemon's
``GET /session/{id}/context``, each a real process against the scripted model server.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import ScriptedServer, reply, tool_call
from cairn.testing.request import message_text

from .conftest import RunCairn
from .test_daemon import serve  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(120)


def test_json_output_says_the_tokens_by_purpose_and_what_fills_the_context(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(tool_call("list_directory", {"path": "."}))
    scripted_server.enqueue(reply("Two entries."))

    done = run_cairn("-p", "list", "--output-format", "json")

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)[-1]
    by_purpose = result["usage_by_purpose"]
    main = by_purpose["session"]["main"]
    assert main["input_tokens"] == result["usage"]["input_tokens"] > 0
    assert main["output_tokens"] == result["usage"]["output_tokens"]
    assert by_purpose["today"]["main"] == main  # the only process of this home today
    context = result["context"]
    names = [part["name"] for part in context["parts"]]
    assert {"system prompt", "tools", "conversation"} <= set(names)
    assert context["estimatedTokens"] == sum(part["tokens"] for part in context["parts"])
    last = scripted_server.requests[-1]  # the scripted server counts its messages' text
    assert context["countedTokens"] == sum(len(message_text(m)) for m in last.messages) // 4


def test_the_context_command_lists_the_parts_in_a_headless_run(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    done = run_cairn("-p", "/context")

    assert done.returncode == 0, done.stderr
    assert "Context window: 131,072 tokens." in done.stdout
    assert "system prompt" in done.stdout and "tools" in done.stdout
    assert "This session: no model requests yet." in done.stdout
    assert scripted_server.requests == []


async def test_the_daemon_says_what_fills_a_sessions_context(
    serve: object,  # noqa: F811  (the fixture imported above)
    scripted_server: ScriptedServer,
    project: Path,
) -> None:
    served = serve()  # type: ignore[operator]
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt_and_wait("what does this project do?")
        async with httpx.AsyncClient(base_url=served.url) as http:
            answer = await http.get(f"/session/{session.session_id}/context")
            missing = await http.get("/session/no-such-session/context")

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["sessionId"] == session.session_id
    assert body["usage"]["session"]["main"]["input_tokens"] > 0
    assert {"system prompt", "tools", "conversation"} <= {
        p["name"] for p in body["context"]["parts"]
    }
    assert missing.status_code == 404
    assert served.stop() == 0
