"""Portable structured output: JSON from endpoints that honour, refuse or ignore response_format.

The Recall selector is the side query that needs it most; these tests drive it through the real
provider against the scripted server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import pytest

from cairn.content import Content
from cairn.llm.errors import ProviderError
from cairn.llm.openai import OpenAIProvider
from cairn.llm.retry import RetryPolicy
from cairn.llm.side_query import side_query
from cairn.llm.structured import ENDPOINTS, RESPOND_TOOL, downgrade
from cairn.memory.document import MemoryDoc
from cairn.memory.recall.selector import manifest_key, select_memories
from cairn.testing import RecordedRequest, ScriptedServer, error_reply, reply, tool_call

from ..memory.memory_helpers import make_doc

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}}
MakeProvider = Callable[..., OpenAIProvider]


async def no_sleep(delay: float) -> None:
    """Retries in these tests happen at once."""


@pytest.fixture
async def make_provider(scripted_server: ScriptedServer) -> AsyncIterator[MakeProvider]:
    made: list[OpenAIProvider] = []

    def make(structured_output: str = "auto") -> OpenAIProvider:
        provider = OpenAIProvider(
            base_url=scripted_server.base_url,
            api_key="k",
            model="main-model",
            fast_model="fast-model",
            retry=RetryPolicy(jitter=0.0),
            sleep=no_sleep,
            structured_output=structured_output,
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()
    ENDPOINTS.clear()


@pytest.fixture
def docs() -> list[MemoryDoc]:
    return [make_doc("release", description="How releases are cut"), make_doc("style")]


def selection(*docs: MemoryDoc) -> dict[str, list[str]]:
    return {"selected_memories": [manifest_key(d) for d in docs]}


def forced_tool(request: RecordedRequest) -> str | None:
    choice = request.body.get("tool_choice") if isinstance(request.body, dict) else None
    return choice["function"]["name"] if isinstance(choice, dict) else None


async def test_the_selector_asks_for_its_schema_itself_with_json_schema(
    scripted_server: ScriptedServer, make_provider: MakeProvider, docs: list[MemoryDoc]
) -> None:
    """llama.cpp honours ``json_object`` with JSON that does not fit the schema, so every
    selector answer fell back (issue 33); ``json_schema`` hands the endpoint the shape."""
    scripted_server.enqueue(reply(json.dumps(selection(docs[0]))))

    chosen = await select_memories(make_provider(), "how do we release?", docs)

    assert chosen == [docs[0]]
    [request] = scripted_server.requests
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "response"
    assert response_format["json_schema"]["schema"]["required"] == ["selected_memories"]
    assert "tools" not in request.body


async def test_a_json_object_only_endpoint_gets_json_object_after_refusing_json_schema(
    docs: list[MemoryDoc],
) -> None:
    with ScriptedServer(response_formats=["json_object"]) as server:
        provider = OpenAIProvider(
            base_url=server.base_url, api_key="k", model="m", sleep=no_sleep
        )
        server.enqueue(
            reply(json.dumps(selection(docs[0]))), reply(json.dumps(selection(docs[1])))
        )

        first = await select_memories(provider, "releases?", docs)
        second = await select_memories(provider, "style?", docs)
        await provider.aclose()
    ENDPOINTS.clear()

    assert (first, second) == ([docs[0]], [docs[1]])
    refused, retried, later = server.requests
    assert refused.body["response_format"]["type"] == "json_schema"
    assert retried.body["response_format"] == {"type": "json_object"}
    assert later.body["response_format"] == {"type": "json_object"}


async def test_the_json_object_setting_still_sends_json_object(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.enqueue(reply('{"answer": "x"}'))

    result = await side_query(
        make_provider("json_object"), purpose="t", system="s", messages=[Content.user("?")],
        json_schema=SCHEMA,
    )  # fmt: skip

    assert result.data == {"answer": "x"}
    [request] = scripted_server.requests
    assert request.body["response_format"] == {"type": "json_object"}


async def test_the_selector_reads_a_forced_tool_call_answer(
    scripted_server: ScriptedServer, make_provider: MakeProvider, docs: list[MemoryDoc]
) -> None:
    scripted_server.enqueue(tool_call(RESPOND_TOOL, selection(docs[1], docs[0])))

    chosen = await select_memories(make_provider("tool"), "style and releases", docs)

    assert chosen == [docs[1], docs[0]]
    [request] = scripted_server.requests
    assert forced_tool(request) == RESPOND_TOOL
    assert request.tool_names == [RESPOND_TOOL]
    assert request.tools[0]["function"]["parameters"]["required"] == ["selected_memories"]
    assert "response_format" not in request.body
    assert request.system is not None and RESPOND_TOOL in request.system


async def test_an_endpoint_refusing_response_format_is_retried_once_then_remembered(
    make_provider: MakeProvider, docs: list[MemoryDoc]
) -> None:
    with ScriptedServer(unsupported=["response_format"]) as server:
        provider = OpenAIProvider(
            base_url=server.base_url, api_key="k", model="m", sleep=no_sleep
        )
        server.enqueue(
            tool_call(RESPOND_TOOL, selection(docs[0])),
            tool_call(RESPOND_TOOL, selection(docs[1])),
        )

        first = await select_memories(provider, "releases?", docs)
        second = await select_memories(provider, "style?", docs)
        await provider.aclose()

    assert (first, second) == ([docs[0]], [docs[1]])
    refused, retried, later = server.requests
    assert "response_format" in refused.body  # the field itself is refused: json_object is not
    assert "response_format" not in retried.body and forced_tool(retried) == RESPOND_TOOL
    assert "response_format" not in later.body and forced_tool(later) == RESPOND_TOOL


async def test_an_endpoint_refusing_tools_too_falls_back_to_the_prompt(
    make_provider: MakeProvider,
) -> None:
    with ScriptedServer(unsupported=["response_format", "tool_choice"]) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="k", model="m", sleep=no_sleep)
        server.enqueue(reply('```json\n{"answer": "prompted"}\n```'))

        result = await side_query(
            provider, purpose="t", system="s", messages=[Content.user("?")], json_schema=SCHEMA
        )
        await provider.aclose()

    assert result.data == {"answer": "prompted"}
    assert len(server.requests) == 3
    last = server.requests[-1]
    assert "response_format" not in last.body and "tool_choice" not in last.body
    assert last.system is not None and '"answer"' in last.system


async def test_a_400_about_something_else_is_not_retried(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.enqueue(error_reply(400, "maximum context length exceeded"))

    with pytest.raises(ProviderError, match="context length"):
        await side_query(
            make_provider(), purpose="t", system="s", messages=[Content.user("?")],
            json_schema=SCHEMA,
        )  # fmt: skip

    assert len(scripted_server.requests) == 1


async def test_an_explicit_strategy_is_never_changed(
    make_provider: MakeProvider,
) -> None:
    with ScriptedServer(unsupported=["response_format"]) as server:
        provider = OpenAIProvider(
            base_url=server.base_url,
            api_key="k",
            model="m",
            sleep=no_sleep,
            structured_output="json_object",
        )

        with pytest.raises(ProviderError, match="response_format"):
            await side_query(
                provider, purpose="t", system="s", messages=[Content.user("?")],
                json_schema=SCHEMA,
            )  # fmt: skip
        await provider.aclose()

    assert len(server.requests) == 1


async def test_the_prompt_strategy_sends_neither_response_format_nor_tools(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.enqueue(reply('{"answer": "plain"}'))

    result = await side_query(
        make_provider("prompt"), purpose="t", system="s", messages=[Content.user("?")],
        json_schema=SCHEMA,
    )  # fmt: skip

    assert result.data == {"answer": "plain"}
    [request] = scripted_server.requests
    assert "response_format" not in request.body and "tools" not in request.body


async def test_a_schema_tool_call_with_unparseable_arguments_is_read_as_text(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.enqueue(tool_call(RESPOND_TOOL, 'sure: {"answer": "inside"}'))

    result = await side_query(
        make_provider("tool"), purpose="t", system="s", messages=[Content.user("?")],
        json_schema=SCHEMA,
    )  # fmt: skip

    assert result.data == {"answer": "inside"}


def test_only_a_400_naming_the_feature_downgrades() -> None:
    named = ProviderError("HTTP 400: response_format is not supported", status=400)
    type_refused = ProviderError(
        "HTTP 400: This response_format type is unavailable now", status=400
    )
    other = ProviderError("HTTP 400: context too long", status=400)
    server = ProviderError("HTTP 500: response_format broke us", status=500)

    assert downgrade("json_schema", named) == "tool"  # the whole field, not one type
    assert downgrade("json_schema", type_refused) == "json_object"
    assert downgrade("json_object", named) == "tool"
    assert downgrade("json_object", other) is None
    assert downgrade("json_object", server) is None
    assert downgrade("tool", ProviderError("HTTP 400: tool_choice unknown", status=400)) == (
        "prompt"
    )
    assert downgrade("prompt", named) is None
