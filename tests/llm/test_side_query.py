"""side_query: one-shot calls outside the conversation, seen from the scripted server."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.content import Content, FunctionCall, FunctionResponse
from cairn.llm.errors import ProviderError
from cairn.llm.openai import OpenAIProvider
from cairn.llm.retry import RetryPolicy
from cairn.llm.side_query import SideQueryResult, parse_json_answer, side_query
from cairn.testing import ScriptedServer, error_reply, reply

SCHEMA = {"type": "object", "properties": {"selected": {"type": "array"}}}


async def no_sleep(delay: float) -> None:
    """Retries in these tests happen at once."""


@pytest.fixture
async def provider(scripted_server: ScriptedServer) -> AsyncIterator[OpenAIProvider]:
    instance = OpenAIProvider(
        base_url=scripted_server.base_url,
        api_key="k",
        model="main-model",
        retry=RetryPolicy(jitter=0.0),
        sleep=no_sleep,
    )
    yield instance
    await instance.aclose()


async def ask(provider: OpenAIProvider, **overrides: Any) -> SideQueryResult:
    arguments: dict[str, Any] = {
        "purpose": "recap",
        "system": "Summarise.",
        "messages": [Content.user("what were we doing?")],
    }
    arguments.update(overrides)
    return await side_query(provider, **arguments)


async def test_the_answer_text_is_trimmed(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply(chunks=["  We were ", "fixing tests.\n"]))

    result = await side_query(provider, purpose="recap", system="s", messages=[Content.user("?")])

    assert result.text == "We were fixing tests."
    assert result.model == "main-model"
    assert result.data is None


async def test_no_tools_are_sent(scripted_server: ScriptedServer, provider: OpenAIProvider) -> None:
    scripted_server.enqueue(reply("ok"))

    await ask(provider)

    assert "tools" not in scripted_server.requests[0].body


async def test_the_system_prompt_and_messages_are_sent_verbatim(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))

    await ask(provider)

    assert scripted_server.requests[0].messages == [
        {"role": "system", "content": "Summarise."},
        {"role": "user", "content": "what were we doing?"},
    ]


async def test_the_purpose_and_session_are_sent_as_headers(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))

    await ask(provider, purpose="recall-selector", session_id="s-9")

    [request] = scripted_server.requests
    assert (request.purpose, request.session_id) == ("recall-selector", "s-9")


async def test_the_fast_model_is_used_when_one_is_set(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.default = reply("ok")
    provider.fast_model = "fast-model"

    result = await ask(provider)

    assert scripted_server.requests[0].model == "fast-model"
    assert result.model == "fast-model"


async def test_the_main_model_is_used_without_a_fast_model(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))

    await ask(provider)

    assert scripted_server.requests[0].model == "main-model"


async def test_an_explicit_model_beats_the_fast_model(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))
    provider.fast_model = "fast-model"

    await ask(provider, model="chosen-model")

    assert scripted_server.requests[0].model == "chosen-model"


async def test_output_limit_and_temperature_are_sent(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))

    await ask(provider, max_output_tokens=300, temperature=0.3)

    [request] = scripted_server.requests
    assert (request.max_tokens, request.temperature) == (300, 0.3)


async def test_the_history_passed_in_is_left_untouched(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))
    history = [
        Content.user("read it"),
        Content("model", [FunctionCall("call_1", "read_file", {"path": "a"})]),
        Content("user", [FunctionResponse("call_1", "read_file", {"output": "text"})]),
    ]
    before = copy.deepcopy(history)

    await ask(provider, messages=history)

    assert history == before


async def test_text_from_a_failed_attempt_is_discarded(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply(chunks=["half an ", "answer"], drop_after_chunks=1))
    scripted_server.enqueue(reply("the whole answer"))

    result = await ask(provider)

    assert result.text == "the whole answer"


async def test_max_attempts_limits_the_requests(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.default = error_reply(503, retry_after=0)

    with pytest.raises(ProviderError):
        await ask(provider, max_attempts=2)

    assert len(scripted_server.requests) == 2


async def test_json_mode_asks_for_one_object_of_the_schema(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply('{"selected": []}'))

    await ask(provider, json_schema=SCHEMA)

    [request] = scripted_server.requests
    assert request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": SCHEMA},
    }
    assert request.system is not None
    assert request.system.startswith("Summarise.")
    assert '"selected"' in request.system


async def test_json_mode_parses_a_fenced_object(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply('```json\n{"selected": ["a.md"]}\n```'))

    result = await ask(provider, json_schema=SCHEMA)

    assert result.data == {"selected": ["a.md"]}


async def test_json_mode_parses_an_object_after_a_preamble(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply('Sure {happy to help}! Here it is: {"selected": ["b.md"]}'))

    result = await ask(provider, json_schema=SCHEMA)

    assert result.data == {"selected": ["b.md"]}


async def test_json_mode_without_an_object_raises_provider_error(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("I cannot decide."))

    with pytest.raises(ProviderError, match="did not answer with a JSON object"):
        await ask(provider, json_schema=SCHEMA)


def test_parse_json_answer_prefers_the_fenced_block() -> None:
    text = 'Example: {"selected": ["wrong"]}\n```json\n{"selected": ["right"]}\n```'

    assert parse_json_answer(text) == {"selected": ["right"]}


def test_parse_json_answer_skips_a_json_array() -> None:
    with pytest.raises(ProviderError):
        parse_json_answer('["not", "an", "object"]')


@given(st.text())
def test_parse_json_answer_returns_an_object_or_raises_provider_error(text: str) -> None:
    try:
        value = parse_json_answer(text)
    except ProviderError:
        return
    assert isinstance(value, dict)


async def test_inline_reasoning_before_a_json_answer_is_not_part_of_the_answer(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply('<think>{"selected": ["wrong"]} no...</think>{"selected": []}'))

    result = await ask(provider, json_schema=SCHEMA)

    assert result.data == {"selected": []}
    assert result.text == '{"selected": []}'
