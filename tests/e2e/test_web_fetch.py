"""web_fetch through the real ``cairn -p`` and ``cairn --acp``: a page served on 127.0.0.1
reaches the fast model as Markdown, its answer reaches the model, and a domain no rule allows
asks first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.testing import RecordedRequest, ScriptedServer, reply, tool_call

from ..tools.test_web_fetch import site as site_fixture
from .conftest import RunCairn
from .test_acp_process import running_agent

site = site_fixture  # the page server, under the name the tests ask for
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def user_settings(env: dict[str, str], settings: dict[str, object]) -> None:
    home = Path(env["CAIRN_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps(settings))


def tool_results(request: RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


def test_cairn_p_fetches_an_allowed_domain_and_the_fast_model_reads_it_as_markdown(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    site: str,
) -> None:
    user_settings(
        cairn_env,
        {
            "tools": {"webFetch": {"allowPrivateAddresses": True}},
            "permissions": {"allow": ["WebFetch(domain:127.0.0.1)"]},
        },
    )
    url = f"{site}/notes"
    scripted_server.enqueue(
        tool_call("web_fetch", {"url": url, "prompt": "What does 2.1 add?"}, id="f"),
        reply("Version 2.1 adds --fast."),
        purpose="main",
    )
    scripted_server.enqueue(reply("It adds the --fast flag."), purpose="web-fetch")

    done = run_cairn("-p", "what is new in 2.1?")

    assert done.returncode == 0, done.stderr
    (asked,) = scripted_server.requests_for("web-fetch")
    page = asked.last_user_text()
    assert "# Release notes\n\n## Version 2.1" in page and "- faster start" in page
    assert "<h2>" not in page and "alert" not in page
    _, second = scripted_server.requests_for("main")
    assert tool_results(second)["f"] == f"From {url}:\n\nIt adds the --fast flag."
    assert done.stdout.strip() == "Version 2.1 adds --fast."


async def test_acp_asks_before_fetching_a_domain_no_rule_allows(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path, site: str
) -> None:
    user_settings(cairn_env, {"tools": {"webFetch": {"allowPrivateAddresses": True}}})
    url = f"{site}/notes"
    scripted_server.enqueue(
        tool_call("web_fetch", {"url": url, "prompt": "versions?"}, id="f"),
        reply("Read it."),
        purpose="main",
    )
    scripted_server.enqueue(reply("2.1"), purpose="web-fetch")
    async with running_agent(cairn_env, project) as agent:
        session_id = await agent.start_session()
        response = await agent.prompt(session_id, "read the notes")

    assert response.stop_reason == "end_turn"
    ((asked, _options),) = agent.client.permission_requests
    assert asked.title == f"Fetch {url}"
    assert len(scripted_server.requests_for("web-fetch")) == 1


def test_a_loopback_page_is_refused_without_the_setting(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, site: str
) -> None:
    scripted_server.enqueue(
        tool_call("web_fetch", {"url": f"{site}/notes", "prompt": "?"}, id="f"),
        reply("Could not."),
        purpose="main",
    )

    done = run_cairn("-p", "read it", "--approval-mode", "yolo")

    assert done.returncode == 0, done.stderr
    _, second = scripted_server.requests_for("main")
    assert "private or local address (127.0.0.1)" in tool_results(second)["f"]
    assert scripted_server.requests_for("web-fetch") == []
