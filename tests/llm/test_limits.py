"""Output bounds: every request carries one, by its kind, and a server refusing it is asked again.

Issue 33: with ``samplingParams.max_tokens`` unset, a local model that never emitted its end
token generated 5,136 tokens in 358 s for "What is the capital of France?", until the server's
context was full. The scripted server plays such a model (``Reply(endless=True)``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from cairn.config.loader import SettingsError, validate_settings
from cairn.config.settings import OutputBounds
from cairn.content import Content
from cairn.llm.errors import ProviderError
from cairn.llm.limits import OUTPUT_TOKEN_LIMITS, output_limit, smaller_output_limit
from cairn.llm.openai import OpenAIProvider
from cairn.llm.side_query import side_query
from cairn.llm.types import Finished, ModelRequest, StreamEvent, TextDelta
from cairn.testing import Reply, ScriptedProvider, ScriptedServer, error_reply, reply

MakeProvider = Callable[..., OpenAIProvider]


async def no_sleep(delay: float) -> None:
    """Retries in these tests happen at once."""


@pytest.fixture
async def make_provider(scripted_server: ScriptedServer) -> AsyncIterator[MakeProvider]:
    made: list[OpenAIProvider] = []

    def make(server: ScriptedServer | None = None, **options: Any) -> OpenAIProvider:
        provider = OpenAIProvider(
            base_url=(server or scripted_server).base_url,
            api_key="k",
            model="main-model",
            sleep=no_sleep,
            **options,
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()


def ask(purpose: str = "main", **fields: Any) -> ModelRequest:
    return ModelRequest(
        model="main-model", contents=[Content.user("What is the capital of France?")],
        purpose=purpose, **fields,
    )  # fmt: skip


async def collect(provider: OpenAIProvider, request: ModelRequest) -> list[StreamEvent]:
    return [event async for event in provider.stream(request)]


def finished(events: list[StreamEvent]) -> Finished:
    [end] = [e for e in events if isinstance(e, Finished)]
    return end


def test_the_settings_name_every_request_kind_that_has_a_default() -> None:
    every = {name: 1 for name in OUTPUT_TOKEN_LIMITS}
    assert set(OutputBounds.model_validate(every).by_kind()) == set(OUTPUT_TOKEN_LIMITS)


def test_a_bound_for_an_unknown_kind_or_not_positive_is_named_in_an_error() -> None:
    def bounds(value: object) -> object:
        return {"model": {"generationConfig": {"maxOutputTokens": value}}}

    settings = validate_settings(bounds({"recall-selector": 512}), "settings.json", "")
    assert settings.model.generation_config.max_output_tokens.by_kind() == {
        "recall-selector": 512
    }
    with pytest.raises(SettingsError, match=r"maxOutputTokens\.main"):
        validate_settings(bounds({"main": 0}), "settings.json", "")


async def test_a_conversation_request_carries_its_default_bound(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.enqueue(reply("Paris."))

    await collect(make_provider(), ask())

    assert scripted_server.requests[0].max_tokens == OUTPUT_TOKEN_LIMITS["main"] == 8192


async def test_each_side_query_kind_carries_its_own_bound(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.default = reply("done")
    provider = make_provider()

    for purpose in ("compress", "recall-selector", "web-fetch", "some-new-kind"):
        await side_query(provider, purpose=purpose, system="s", messages=[Content.user("?")])

    bounds = [r.max_tokens for r in scripted_server.requests]
    assert bounds == [8192, 1024, 4096, 4096]  # an unknown kind gets the general default


async def test_the_users_bound_for_a_kind_wins_over_the_callers_and_the_default(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.default = reply("done")
    provider = make_provider(output_limits={"recap": 500, "main": 2000})

    await side_query(
        provider, purpose="recap", system="s", messages=[Content.user("?")], max_output_tokens=300
    )
    await collect(provider, ask(max_output_tokens=100))
    await side_query(provider, purpose="title", system="s", messages=[Content.user("?")])

    assert [r.max_tokens for r in scripted_server.requests] == [500, 2000, 64]


async def test_a_model_that_never_stops_ends_at_the_bound_with_finish_reason_length(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.enqueue(Reply(text="The capital of France is Paris. ", endless=True))

    events = await collect(make_provider(output_limits={"main": 300}), ask())

    end = finished(events)
    assert end.reason == "length"
    assert end.usage.output_tokens == 300 + len("The capital of France is Paris. ") // 4
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.startswith("The capital of France is Paris. ")
    assert len(text) == len("The capital of France is Paris. ") + 300 * 4


async def test_a_side_query_cut_at_its_bound_says_so() -> None:
    provider = ScriptedProvider(Reply(text="We were ", endless=True))

    result = await side_query(
        provider, purpose="recap", system="s", messages=[Content.user("?")], max_output_tokens=40
    )

    assert result.finish_reason == "length"
    assert provider.requests[0].max_output_tokens == 40


async def test_a_model_refusing_max_tokens_gets_max_completion_tokens_from_then_on(
    make_provider: MakeProvider,
) -> None:
    """OpenAI's reasoning models answer 400 "Unsupported parameter: 'max_tokens' ... Use
    'max_completion_tokens' instead."; sending a bound by default must not break them."""
    with ScriptedServer(unsupported=["max_tokens"]) as server:
        server.default = reply("ok")
        provider = make_provider(server)

        await collect(provider, ask())
        await collect(provider, ask())

    refused, retried, later = server.requests
    assert refused.body["max_tokens"] == 8192
    assert "max_tokens" not in retried.body and retried.body["max_completion_tokens"] == 8192
    assert "max_tokens" not in later.body and later.body["max_completion_tokens"] == 8192


async def test_a_bound_above_what_the_model_can_write_is_lowered_to_what_it_names(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    scripted_server.enqueue(
        error_reply(
            400,
            "max_tokens is too large: 8192. This model supports at most 4096 completion tokens, "
            "whereas you provided 8192.",
        ),
        reply("Paris."),
    )

    events = await collect(make_provider(), ask())

    assert finished(events).reason == "stop"
    assert [r.max_tokens for r in scripted_server.requests] == [8192, 4096]


async def test_a_vllm_server_gets_the_bound_its_window_leaves_after_the_prompt(
    make_provider: MakeProvider,
) -> None:
    with ScriptedServer(context_window=2048, flavour="vllm") as server:
        server.enqueue(reply("Paris."))

        events = await collect(make_provider(server), ask())

    assert finished(events).reason == "stop"
    refused, retried = server.requests
    assert refused.max_tokens == 8192
    assert retried.max_tokens is not None and 1900 < retried.max_tokens < 2048


async def test_a_bound_refused_twice_is_reported_not_retried_forever(
    scripted_server: ScriptedServer, make_provider: MakeProvider
) -> None:
    too_large = "max_tokens is too large. This model supports at most 4096 completion tokens."
    scripted_server.enqueue(error_reply(400, too_large), error_reply(400, too_large))

    with pytest.raises(ProviderError, match="at most 4096"):
        await collect(make_provider(), ask())

    assert len(scripted_server.requests) == 2


def test_output_limit_prefers_the_setting_then_the_caller_then_the_default() -> None:
    assert output_limit("recap", 300, {"recap": 500}) == 500
    assert output_limit("recap", 300, {}) == 300
    assert output_limit("recap", None) == 300
    assert output_limit("main", None, {"recap": 500}) == 8192


@pytest.mark.parametrize(
    ("message", "asked", "expected"),
    [
        ("This model supports at most 4096 completion tokens, whereas you provided 8192.",
         8192, 4096),
        ("max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for "
         "claude-sonnet-4", 100000, 64000),
        ("'max_tokens' or 'max_completion_tokens' is too large: 2000. This model's maximum "
         "context length is 4096 tokens and your request has 2104 input tokens "
         "(2000 > 4096 - 2104).", 2000, 1992),
        ("This model's maximum context length is 4096 tokens. However, you requested 5000 "
         "tokens (3000 in the messages, 2000 in the completion).", 2000, 1096),
        ("This model supports at most 4096 completion tokens", 1000, None),  # already below
        ("maximum context length is 4096 tokens and your request has 4090 input tokens", 100,
         None),  # six tokens of room: not worth asking
        ("HTTP 400: something else entirely", 8192, None),
    ],
)  # fmt: skip
def test_smaller_output_limit_reads_what_each_server_says(
    message: str, asked: int, expected: int | None
) -> None:
    assert smaller_output_limit(message, asked) == expected
