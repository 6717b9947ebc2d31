"""web_search through the real ``cairn -p``: the provider configured in the user's settings
(served on 127.0.0.1) answers, its results reach the model's next request; without a provider
there is no tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply, tool_call

from ..tools.test_web_search import ProviderHandler
from ..tools.test_web_search import provider_server as provider_server_fixture
from .conftest import RunCairn
from .test_web_fetch import tool_results, user_settings

provider_server = provider_server_fixture  # the search provider, under the name asked for
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def search_settings(env: dict[str, str], **web_search: str) -> None:
    """The user's settings hold ``tools.webSearch`` = ``web_search``."""
    user_settings(env, {"tools": {"webSearch": web_search}})


def test_cairn_p_searches_and_the_results_reach_the_next_request(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    provider_server: str,
) -> None:
    cairn_env["TAVILY_API_KEY"] = "k-from-env"
    ProviderHandler.seen.clear()
    search_settings(cairn_env, provider="tavily", baseUrl=f"{provider_server}/tavily")
    scripted_server.enqueue(
        tool_call("web_search", {"query": "python 3.13"}, id="s"),
        reply("3.13 has a new interpreter."),
        purpose="main",
    )

    done = run_cairn("-p", "what is new in python 3.13?")

    assert done.returncode == 0, done.stderr
    first, second = scripted_server.requests_for("main")
    assert "web_search" in first.tool_names
    (searched,) = ProviderHandler.seen
    assert searched["body"]["query"] == "python 3.13"
    assert searched["headers"]["Authorization"] == "Bearer k-from-env"
    results = tool_results(second)["s"]
    assert results.startswith("Web results for 'python 3.13':\n\n1. What's New In Python 3.13\n")
    assert "https://docs.python.org/3/whatsnew/3.13.html" in results
    assert done.stdout.strip() == "3.13 has a new interpreter."


def test_a_malformed_provider_answer_reaches_the_model_as_an_error(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
    provider_server: str,
) -> None:
    search_settings(cairn_env, provider="tavily", apiKey="k", baseUrl=f"{provider_server}/broken")
    scripted_server.enqueue(
        tool_call("web_search", {"query": "q"}, id="s"), reply("It failed."), purpose="main"
    )

    done = run_cairn("-p", "search")

    assert done.returncode == 0, done.stderr
    _, second = scripted_server.requests_for("main")
    assert "tavily search answered something that is not JSON" in tool_results(second)["s"]
    assert "Traceback" not in done.stderr


def test_without_a_provider_there_is_no_web_search_tool(
    run_cairn: RunCairn, scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    cairn_env["TAVILY_API_KEY"] = "k"  # a key alone configures nothing
    scripted_server.enqueue(reply("Hi."), purpose="main")

    done = run_cairn("-p", "hello")

    assert done.returncode == 0, done.stderr
    (request,) = scripted_server.requests_for("main")
    assert "web_fetch" in request.tool_names and "web_search" not in request.tool_names


def test_a_provider_without_its_key_is_a_warning_naming_the_setting_and_no_tool(
    run_cairn: RunCairn, scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    cairn_env.pop("TAVILY_API_KEY", None)
    search_settings(cairn_env, provider="tavily")
    scripted_server.enqueue(reply("Hi."), purpose="main")

    done = run_cairn("-p", "hello")

    assert done.returncode == 0, done.stderr
    assert "set tools.webSearch.apiKey or TAVILY_API_KEY" in done.stderr
    (request,) = scripted_server.requests_for("main")
    assert "web_search" not in request.tool_names
