"""The context window learnt from the server: its model information and its refusals.

Issue 33: llama.cpp reports ``n_ctx`` in ``/props`` and in its 400 ``exceed_context_size_error``;
cairn used neither. The scripted server plays llama.cpp, vLLM and Ollama serving a fixed window
(``ScriptedServer(context_window=..., flavour=...)``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.content import Content
from cairn.llm.context_window import Overflow, context_overflow, looks_local
from cairn.llm.errors import ContextOverflowError, ProviderError
from cairn.llm.openai import OpenAIProvider
from cairn.llm.types import ModelRequest
from cairn.testing import ScriptedServer, error_reply, reply

MakeProvider = Callable[..., OpenAIProvider]
MODEL = "gemma-3-270m"


async def no_sleep(delay: float) -> None:
    """Retries in these tests happen at once."""


@pytest.fixture
async def make_provider() -> AsyncIterator[MakeProvider]:
    made: list[OpenAIProvider] = []

    def make(server: ScriptedServer, base_url: str | None = None) -> OpenAIProvider:
        provider = OpenAIProvider(
            base_url=base_url or server.base_url, api_key="k", model=MODEL, sleep=no_sleep
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()


def ask(text: str) -> ModelRequest:
    return ModelRequest(model=MODEL, contents=[Content.user(text)])


async def send(provider: OpenAIProvider, text: str) -> None:
    async for _ in provider.stream(ask(text)):
        pass


async def test_llama_cpp_says_its_window_in_props(make_provider: MakeProvider) -> None:
    with ScriptedServer(models=[MODEL], context_window=8192, flavour="llama.cpp") as server:
        provider = make_provider(server)

        assert provider.context_window(MODEL) is None  # nothing asked yet
        window = await provider.learn_context_window(MODEL)
        again = await provider.learn_context_window(MODEL)

    assert window == again == provider.context_window(MODEL) == 8192
    asked = [(r.method, r.path) for r in server.other_requests]
    assert asked == [("GET", "/v1/models"), ("GET", "/props")]  # once, however often asked


async def test_vllm_says_its_window_in_its_model_list(make_provider: MakeProvider) -> None:
    with ScriptedServer(models=[MODEL], context_window=16384, flavour="vllm") as server:
        window = await make_provider(server).learn_context_window(MODEL)

    assert window == 16384
    assert [r.path for r in server.other_requests] == ["/v1/models"]


async def test_ollama_says_the_window_a_loaded_model_runs_with(
    make_provider: MakeProvider,
) -> None:
    with ScriptedServer(models=[MODEL], context_window=4096, flavour="ollama") as server:
        window = await make_provider(server).learn_context_window(MODEL)

    assert window == 4096
    assert "/api/ps" in [r.path for r in server.other_requests]


async def test_a_server_that_cannot_be_reached_leaves_the_window_unknown(
    make_provider: MakeProvider,
) -> None:
    with ScriptedServer(models=[MODEL]) as server:
        nowhere = server.base_url.replace("127.0.0.1", "cairn-test.invalid")

        window = await make_provider(server, base_url=nowhere).learn_context_window(MODEL)

    assert window is None  # answered None, never raised


async def test_a_server_without_a_window_leaves_it_unknown(make_provider: MakeProvider) -> None:
    with ScriptedServer(models=[MODEL]) as server:
        window = await make_provider(server).learn_context_window(MODEL)

    assert window is None


async def test_llama_cpps_refusal_of_a_long_prompt_names_the_window_and_is_remembered(
    make_provider: MakeProvider,
) -> None:
    with ScriptedServer(models=[MODEL], context_window=512, flavour="llama.cpp") as server:
        provider = make_provider(server)

        with pytest.raises(ContextOverflowError) as caught:
            await send(provider, "word " * 1000)

    assert caught.value.window == 512
    assert caught.value.prompt_tokens is not None and caught.value.prompt_tokens > 512
    assert caught.value.status == 400
    assert "exceeds the available context size (512 tokens)" in str(caught.value)
    assert provider.context_window(MODEL) == 512
    assert len(server.requests) == 1  # not retried as it is


async def test_vllms_refusal_of_a_long_prompt_is_an_overflow_too(
    make_provider: MakeProvider,
) -> None:
    with ScriptedServer(models=[MODEL], context_window=512, flavour="vllm") as server:
        provider = make_provider(server)

        with pytest.raises(ContextOverflowError) as caught:
            await send(provider, "word " * 1000)

    assert caught.value.window == 512
    assert provider.context_window(MODEL) == 512


async def test_an_openai_context_length_error_is_an_overflow_without_a_key_hint(
    make_provider: MakeProvider,
) -> None:
    with ScriptedServer(models=[MODEL]) as server:
        server.enqueue(
            error_reply(
                400,
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130020 tokens. Please reduce the length of the messages.",
            )
        )
        with pytest.raises(ContextOverflowError) as caught:
            await send(make_provider(server), "hi")

    assert (caught.value.window, caught.value.prompt_tokens) == (128000, 130020)
    assert "Check the API key" not in str(caught.value)


async def test_a_prompt_that_fits_is_answered(make_provider: MakeProvider) -> None:
    with ScriptedServer(models=[MODEL], context_window=4096) as server:
        server.enqueue(reply("Paris."))
        await send(make_provider(server), "What is the capital of France?")

    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("message", "data", "expected"),
    [
        ("request (4476 tokens) exceeds the available context size (4096 tokens)",
         {"error": {"type": "exceed_context_size_error", "n_ctx": 4096, "n_prompt_tokens": 4476}},
         Overflow(4096, 4476)),
        ("the request exceeds the available context size, try increasing it", None,
         Overflow(None, None)),  # an older llama.cpp: no numbers
        ("prompt is too long: 210000 tokens > 200000 maximum", None, Overflow(200000, 210000)),
        ("Trying to keep the first 5000 tokens when context the overflows. However, the model is "
         "loaded with context length of only 4096 tokens, which is not enough.", None,
         Overflow(4096, 5000)),  # LM Studio
        ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
         "(4500 in the messages, 500 in the completion).", None, Overflow(4096, 4500)),
        ("This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "
         "(3000 in the messages, 2000 in the completion).", None, None),  # the bound's fault
        ("Invalid value for 'temperature'", None, None),
    ],
)  # fmt: skip
def test_context_overflow_reads_each_servers_refusal(
    message: str, data: Any, expected: Overflow | None
) -> None:
    assert context_overflow(400, data, message) == expected


def test_only_a_refusal_is_an_overflow() -> None:
    assert context_overflow(500, None, "maximum context length is 4096 tokens") is None


@given(st.text(), st.integers(min_value=100, max_value=599))
def test_any_error_text_is_read_without_an_exception(text: str, status: int) -> None:
    overflow = context_overflow(status, {"error": {"message": text}}, text)
    assert overflow is None or isinstance(overflow, Overflow)


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:1234/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://172.20.0.3:8000/v1", True),
        ("http://gpu-box:11434/v1", True),  # Ollama's port
        ("https://api.openai.com/v1", False),
        ("http://172.40.0.3:8000/v1", False),
    ],
)
def test_looks_local(url: str, local: bool) -> None:
    assert looks_local(url) is local


def test_an_overflow_is_a_provider_error() -> None:
    assert issubclass(ContextOverflowError, ProviderError)


async def test_the_anthropic_wire_asks_its_own_model_list() -> None:
    from cairn.llm.anthropic import AnthropicProvider

    with ScriptedServer(models=[MODEL]) as server:
        root = server.base_url.removesuffix("/v1")  # ANTHROPIC_BASE_URL without /v1
        provider = AnthropicProvider(base_url=root, api_key="k", model=MODEL)
        window = await provider.learn_context_window(MODEL)
        await provider.aclose()

    assert window is None
    assert server.other_requests[0].path == "/v1/models"
