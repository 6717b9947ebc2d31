"""The OpenAI-compatible provider against the scripted server: wire format, streaming, retries."""

from __future__ import annotations

import io
import json
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cairn.content import Content, FunctionCall, FunctionResponse, Text, Thought
from cairn.llm._httpx import httpx
from cairn.llm.connections import untrusting_context
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.openai import OpenAIProvider
from cairn.llm.retry import RetryPolicy
from cairn.llm.transport import tls_context
from cairn.llm.types import (
    INVALID_ARGUMENTS_KEY,
    Finished,
    ModelRequest,
    StreamEvent,
    StreamRetry,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    ToolDeclaration,
    Usage,
)
from cairn.testing import Reply, ScriptedServer, ToolCallSpec, error_reply, reply, tool_call

from ..helpers import FakeClock, RecordingSleep

NO_JITTER = RetryPolicy(jitter=0.0)


@pytest.fixture
async def provider(
    scripted_server: ScriptedServer, sleep: RecordingSleep
) -> AsyncIterator[OpenAIProvider]:
    instance = OpenAIProvider(
        base_url=scripted_server.base_url,
        api_key="secret-key",
        model="main-model",
        retry=NO_JITTER,
        sleep=sleep,
    )
    yield instance
    await instance.aclose()


def ask(text: str = "hello", **fields: Any) -> ModelRequest:
    return ModelRequest(model="main-model", contents=[Content.user(text)], **fields)


async def collect(
    provider: OpenAIProvider, request: ModelRequest | None = None
) -> list[StreamEvent]:
    return [event async for event in provider.stream(request or ask())]


def texts(events: list[StreamEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


def calls(events: list[StreamEvent]) -> list[FunctionCall]:
    return [e.call for e in events if isinstance(e, ToolCallDelta)]


def retries(events: list[StreamEvent]) -> list[StreamRetry]:
    return [e for e in events if isinstance(e, StreamRetry)]


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})


# -- streaming ---------------------------------------------------------------------------------


async def test_text_chunks_stream_as_text_deltas_then_finished(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply(chunks=["Hel", "lo", " there"]))

    events = await collect(provider)

    assert texts(events) == ["Hel", "lo", " there"]
    assert isinstance(events[-1], Finished)
    assert events[-1].reason == "stop"


async def test_on_sent_is_told_when_each_attempt_is_written_before_its_answer(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """Recall's refinement waits for this (issue #32): told once per attempt, as soon as the
    body is written, while the answer is still to come."""
    scripted_server.enqueue(error_reply(503), reply("late", delay=0.3))
    events: list[StreamEvent] = []
    seen: list[tuple[int, int]] = []  # (events streamed, requests received) at each call

    def on_sent() -> None:
        seen.append((len(events), len(scripted_server.requests)))

    async for event in provider.stream(ask(on_sent=on_sent)):
        events.append(event)

    assert texts(events) == ["late"]
    assert [streamed for streamed, _received in seen] == [0, 1]  # the retry notice came first
    assert len(seen) == len(scripted_server.requests) == 2


async def test_reasoning_content_becomes_thought_deltas(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("answer", reasoning="let me think"))

    events = await collect(provider)

    assert events[0] == ThoughtDelta("let me think")
    assert texts(events) == ["answer"]


async def test_tool_calls_arrive_complete_after_the_text(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(
        Reply(
            text="Reading both.",
            tool_calls=[
                ToolCallSpec("read_file", {"path": "a.txt"}, id="call_a"),
                ToolCallSpec("read_file", {"path": "b.txt"}, id="call_b"),
            ],
        )
    )

    events = await collect(provider)

    assert isinstance(events[0], TextDelta)
    assert calls(events) == [
        FunctionCall("call_a", "read_file", {"path": "a.txt"}),
        FunctionCall("call_b", "read_file", {"path": "b.txt"}),
    ]
    assert isinstance(events[-1], Finished)
    assert events[-1].reason == "tool_calls"


async def test_tool_calls_are_assembled_by_index_from_interleaved_fragments(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    def opening(index: int, call_id: str, name: str) -> dict[str, Any]:
        function = {"name": name, "arguments": ""}
        return {
            "tool_calls": [
                {"index": index, "id": call_id, "type": "function", "function": function}
            ]
        }

    def fragment(index: int, text: str) -> dict[str, Any]:
        return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}

    scripted_server.enqueue(
        Reply(
            raw_sse=[
                chunk({"role": "assistant"}),
                chunk(opening(0, "call_x", "glob")),
                chunk(opening(1, "call_y", "grep_search")),
                chunk(fragment(1, '{"pattern": ')),
                chunk(fragment(0, '{"pattern": "*.md"')),
                chunk(fragment(1, '"TODO"}')),
                chunk(fragment(0, "}")),
                chunk({}, finish_reason="tool_calls"),
                "[DONE]",
            ]
        )
    )

    events = await collect(provider)

    assert calls(events) == [
        FunctionCall("call_x", "glob", {"pattern": "*.md"}),
        FunctionCall("call_y", "grep_search", {"pattern": "TODO"}),
    ]


async def test_invalid_tool_call_arguments_surface_as_the_marker(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(tool_call("edit", '{"path": "a.txt", "old":', id="call_1"))

    [call] = calls(await collect(provider))

    assert call.args == {INVALID_ARGUMENTS_KEY: '{"path": "a.txt", "old":'}


async def test_usage_is_reported_on_finished(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 30,
        "total_tokens": 1230,
        "prompt_tokens_details": {"cached_tokens": 1000},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    scripted_server.enqueue(reply("ok", usage=usage))

    finished = (await collect(provider))[-1]

    assert isinstance(finished, Finished)
    assert finished.usage == Usage(1200, 30, 1230, 1000, 12)


async def test_a_json_answer_to_a_streaming_request_is_understood(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(
        Reply(text="plain json", tool_calls=[ToolCallSpec("glob", {"pattern": "*"})], stream=False)
    )

    events = await collect(provider)

    assert texts(events) == ["plain json"]
    assert [c.name for c in calls(events)] == ["glob"]
    assert isinstance(events[-1], Finished)


async def test_the_connection_is_reused_across_requests(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """Regression: stopping at [DONE] left the body unread, so every request reconnected."""
    scripted_server.default = reply("ok")

    for _ in range(3):
        await collect(provider)

    assert len({r.connection for r in scripted_server.requests}) == 1


async def test_each_session_keeps_to_one_pool_and_reuses_its_connection(
    scripted_server: ScriptedServer,
) -> None:
    """Sessions are spread over the pools; each session's requests stay on one connection."""
    scripted_server.default = reply("ok")
    provider = OpenAIProvider(
        base_url=scripted_server.base_url, api_key="k", model="m", retry=NO_JITTER, pools=4
    )
    sessions = [f"session-{n}" for n in range(8)]
    try:
        for _ in range(3):
            for session in sessions:
                await collect(provider, ask(session_id=session))
    finally:
        await provider.aclose()

    by_session: dict[str | None, set[int]] = {}
    for request in scripted_server.requests:
        by_session.setdefault(request.session_id, set()).add(request.connection)
    assert set(by_session) == set(sessions)
    assert all(len(connections) == 1 for connections in by_session.values())
    assert 1 < len({r.connection for r in scripted_server.requests}) <= 4


def test_an_http_endpoint_gets_no_tls_context_and_its_pool_trusts_nothing() -> None:
    """Loading the CA bundle costs ~40 ms at start-up, and http:// never uses TLS; should it
    ever, the pool's context still verifies, and with no CA every certificate is refused."""
    assert tls_context("http://127.0.0.1:8000/v1").result() is None

    context = untrusting_context()

    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0


def test_an_https_endpoint_gets_the_verifying_context_httpx_would_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NODE_EXTRA_CA_CERTS", raising=False)
    context = tls_context("https://api.example.com/v1").result(timeout=30)
    expected = httpx.create_ssl_context(trust_env=True)

    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.cert_store_stats() == expected.cert_store_stats()


def test_ssl_cert_file_replaces_the_ca_bundle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A TLS-intercepting proxy's CA is trusted through SSL_CERT_FILE, as httpx reads it."""
    monkeypatch.delenv("NODE_EXTRA_CA_CERTS", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(_one_ca(tmp_path)))

    context = tls_context("https://api.example.com/v1").result(timeout=30)

    assert context.cert_store_stats()["x509_ca"] == 1


def _one_ca(folder: Path, index: int = 0) -> Path:
    """A PEM file holding the ``index``-th CA of certifi's bundle alone."""
    import certifi

    marker = "-----END CERTIFICATE-----"
    blocks = Path(certifi.where()).read_text().split(marker)
    block = blocks[index]
    path = folder / f"corporate-ca-{index}.pem"
    path.write_text(block[block.index("-----BEGIN CERTIFICATE-----") :] + marker + "\n")
    return path


def test_node_extra_ca_certs_adds_to_the_ca_bundle_it_does_not_replace_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Users of Node tools (Qwen Code, Claude Code) behind a TLS-intercepting proxy set
    NODE_EXTRA_CA_CERTS: a PEM file added to the default CAs, as Node.js reads it."""
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(_one_ca(tmp_path, 0)))
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(_one_ca(tmp_path, 1)))

    context = tls_context("https://api.example.com/v1").result(timeout=30)

    assert context.cert_store_stats()["x509_ca"] == 2  # SSL_CERT_FILE's one, and the extra one


def test_an_unreadable_node_extra_ca_certs_is_a_warning_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cairn.debug_log import mirror_warnings
    from cairn.llm.certificates import extra_ca_problem

    missing = tmp_path / "no-such-ca.pem"
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(_one_ca(tmp_path)))
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(missing))
    warnings = io.StringIO()
    mirror_warnings(warnings)
    try:
        context = tls_context("https://api.example.com/v1").result(timeout=30)
    finally:
        mirror_warnings(None)

    assert context.cert_store_stats()["x509_ca"] == 1  # the rest of the trust store applies
    expected = (
        f"NODE_EXTRA_CA_CERTS names {str(missing)!r}, which was not added to the trusted "
        "certificates: No such file or directory"
    )
    assert extra_ca_problem() == expected
    assert warnings.getvalue() == f"warning: [TLS] {expected}\n"


async def test_warm_up_asks_for_the_model_list(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    await provider.warm_up()

    [warm] = scripted_server.other_requests
    assert (warm.method, warm.path, warm.purpose) == ("HEAD", "/v1/models", "warmup")
    assert scripted_server.requests == []


# -- the request -------------------------------------------------------------------------------


async def test_purpose_session_and_authorization_headers_are_sent(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))

    await collect(provider, ask(purpose="recall-selector", session_id="session-7"))

    [request] = scripted_server.requests
    assert request.headers["Authorization"] == "Bearer secret-key"
    assert request.purpose == "recall-selector"
    assert request.session_id == "session-7"


async def test_no_session_header_is_sent_without_a_session(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))

    await collect(provider)

    assert "X-Cairn-Session-Id" not in scripted_server.requests[0].headers


async def test_the_body_carries_model_sampling_tools_and_streaming_options(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))
    tool = ToolDeclaration("glob", "Find files", {"type": "object", "properties": {}})

    await collect(
        provider,
        ask(
            tools=[tool],
            max_output_tokens=300,
            temperature=0.3,
            top_p=0.9,
            response_schema={"type": "object"},
        ),
    )

    body = scripted_server.requests[0].body
    assert body["model"] == "main-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 300
    assert body["temperature"] == 0.3
    assert body["top_p"] == 0.9
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": {"type": "object"}},
    }
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "glob",
                "description": "Find files",
                "parameters": tool.parameters,
            },
        }
    ]


async def test_no_tools_key_is_sent_without_tools(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))

    await collect(provider)

    assert "tools" not in scripted_server.requests[0].body


async def test_history_is_sent_as_system_user_assistant_and_tool_messages(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))
    history = [
        Content.user("list the notes"),
        Content(
            "model",
            [
                Thought("look first"),
                Text("Looking."),
                FunctionCall("call_1", "glob", {"pattern": "*.md"}),
            ],
        ),
        Content(
            "user",
            [FunctionResponse("call_1", "glob", {"output": "a.md"}), Text("and be quick")],
        ),
    ]

    await collect(provider, ModelRequest(model="main-model", contents=history, system="You help."))

    assert scripted_server.requests[0].messages == [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "list the notes"},
        {
            "role": "assistant",
            "content": "Looking.",
            "reasoning_content": "look first",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "glob", "arguments": '{"pattern": "*.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.md"},
        {"role": "user", "content": "and be quick"},
    ]


async def test_a_tool_error_is_sent_as_the_tool_message_content(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))
    history = [
        Content("model", [FunctionCall("call_1", "read_file", {"path": "x"})]),
        Content("user", [FunctionResponse("call_1", "read_file", {"error": "no such file"})]),
    ]

    await collect(provider, ModelRequest(model="main-model", contents=history))

    assert scripted_server.requests[0].messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "no such file",
    }


async def test_unanswered_calls_and_unmatched_responses_are_dropped(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("ok"))
    history = [
        Content.user("go"),
        Content("model", [Text("Trying."), FunctionCall("call_lost", "glob", {})]),
        Content.user("what happened?"),
        Content("user", [FunctionResponse("call_stray", "glob", {"output": "?"})]),
        Content("model", [FunctionCall("call_only", "glob", {})]),
    ]

    await collect(provider, ModelRequest(model="main-model", contents=history))

    assert scripted_server.requests[0].messages == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Trying."},
        {"role": "user", "content": "what happened?"},
    ]


async def test_a_response_not_right_after_its_call_does_not_keep_the_call(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """Regression: a call answered only after a later assistant message was kept unanswered."""
    scripted_server.enqueue(reply("ok"))
    history = [
        Content("model", [FunctionCall("call_early", "glob", {})]),
        Content.user("meanwhile"),
        Content("model", [FunctionCall("call_late", "grep_search", {})]),
        Content(
            "user",
            [
                FunctionResponse("call_early", "glob", {"output": "early"}),
                FunctionResponse("call_late", "grep_search", {"output": "late"}),
            ],
        ),
    ]

    await collect(provider, ModelRequest(model="main-model", contents=history))

    messages = scripted_server.requests[0].messages
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_late"]
    assert messages[2]["tool_call_id"] == "call_late"


# -- retries -----------------------------------------------------------------------------------


async def test_a_500_is_retried_after_retry_after_then_succeeds(
    scripted_server: ScriptedServer, provider: OpenAIProvider, sleep: RecordingSleep
) -> None:
    scripted_server.enqueue(error_reply(500, "overloaded", retry_after=0), reply("recovered"))

    events = await collect(provider)

    [retry] = retries(events)
    assert (retry.attempt, retry.delay) == (2, 0.0)
    assert "overloaded" in retry.reason
    assert texts(events) == ["recovered"]
    assert sleep.delays == [0.0]
    assert len(scripted_server.requests) == 2


async def test_a_429_is_retried(scripted_server: ScriptedServer, provider: OpenAIProvider) -> None:
    scripted_server.enqueue(error_reply(429, "rate limited", retry_after=0), reply("ok"))

    events = await collect(provider)

    assert len(retries(events)) == 1
    assert texts(events) == ["ok"]


async def test_without_retry_after_the_backoff_doubles_from_1_5_seconds(
    scripted_server: ScriptedServer, provider: OpenAIProvider, sleep: RecordingSleep
) -> None:
    scripted_server.enqueue(error_reply(503), error_reply(503), error_reply(503), reply("ok"))

    await collect(provider)

    assert sleep.delays == [1.5, 3.0, 6.0]


async def test_http_failures_stop_after_max_attempts(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.default = error_reply(502, "bad gateway", retry_after=0)

    with pytest.raises(ProviderError, match="bad gateway") as failure:
        await collect(provider, ask(max_attempts=3))

    assert failure.value.status == 502
    assert len(scripted_server.requests) == 3


async def test_a_400_is_not_retried(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(error_reply(400, "bad tool schema"), reply("never"))

    with pytest.raises(ProviderError, match="bad tool schema") as failure:
        await collect(provider)

    assert failure.value.status == 400
    assert not failure.value.retryable
    assert len(scripted_server.requests) == 1


async def test_max_attempts_one_means_a_single_request(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.default = error_reply(500, retry_after=0)

    with pytest.raises(ProviderError):
        await collect(provider, ask(max_attempts=1))

    assert len(scripted_server.requests) == 1


async def test_max_attempts_one_does_not_retry_a_dropped_stream(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.default = reply(chunks=["a", "b"], drop_after_chunks=1)

    with pytest.raises(InvalidStreamError):
        await collect(provider, ask(max_attempts=1))

    assert len(scripted_server.requests) == 1


async def test_a_dropped_stream_is_retried_twice_then_fails(
    scripted_server: ScriptedServer, provider: OpenAIProvider, sleep: RecordingSleep
) -> None:
    scripted_server.default = reply(chunks=["partial", "never"], drop_after_chunks=1)
    events: list[StreamEvent] = []

    with pytest.raises(InvalidStreamError) as failure:
        async for event in provider.stream(ask()):
            events.append(event)

    assert failure.value.kind == "dropped"
    assert len(scripted_server.requests) == 3
    assert [r.attempt for r in retries(events)] == [2, 3]
    assert sleep.delays == [0.5, 1.0]


async def test_a_dropped_stream_is_retried_within_its_own_budget_after_http_retries(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(
        error_reply(500, retry_after=0),
        reply("cut", drop_after_chunks=0),
        error_reply(500, retry_after=0),
        reply("whole"),
    )

    events = await collect(provider, ask(max_attempts=3))

    assert texts(events) == ["whole"]
    assert len(scripted_server.requests) == 4


async def test_output_before_a_drop_is_followed_by_a_retry_event(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply(chunks=["half", "rest"], drop_after_chunks=1), reply("whole"))

    events = await collect(provider)

    kinds = [type(e).__name__ for e in events]
    assert kinds == ["TextDelta", "StreamRetry", "TextDelta", "Finished"]
    assert texts(events) == ["half", "whole"]


async def test_a_stream_without_a_finish_reason_is_retried(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply("unfinished", omit_finish=True), reply("finished"))

    events = await collect(provider)

    [retry] = retries(events)
    assert "finish reason" in retry.reason
    assert texts(events)[-1] == "finished"


async def test_an_empty_answer_is_retried_as_an_invalid_stream(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.default = Reply()

    with pytest.raises(InvalidStreamError) as failure:
        await collect(provider)

    assert failure.value.kind == "no_response"
    assert len(scripted_server.requests) == 3


async def test_an_error_event_inside_the_stream_is_retried(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(
        Reply(raw_sse=[json.dumps({"error": {"message": "upstream hiccup"}})]), reply("ok")
    )

    events = await collect(provider)

    assert "upstream hiccup" in retries(events)[0].reason
    assert texts(events) == ["ok"]


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_refused_connection_fails_after_one_quick_retry_naming_url_and_setting(
    sleep: RecordingSleep,
) -> None:
    """Regression (#16): a refused connection went through the whole 7-attempt backoff (78 s)."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    unreachable = OpenAIProvider(
        base_url=url, api_key="k", model="m", sleep=sleep, base_url_setting="OPENAI_BASE_URL"
    )
    events: list[StreamEvent] = []

    with pytest.raises(ProviderError) as failure:
        async for event in unreachable.stream(ask()):
            events.append(event)
    await unreachable.aclose()

    message = str(failure.value)
    assert f"{url}/chat/completions" in message
    assert "OPENAI_BASE_URL" in message
    assert "connection refused" in message
    assert len(sleep.delays) == 1 and sleep.delays[0] <= 1.0
    [retry] = retries(events)
    assert (retry.attempt, retry.max_attempts) == (2, 2)


async def test_a_name_that_does_not_resolve_fails_after_one_quick_retry(
    sleep: RecordingSleep,
) -> None:
    """Regression (#16): a DNS failure took the whole backoff too (``.invalid`` never resolves)."""
    bad = OpenAIProvider(
        base_url="http://no-such-host.invalid/v1",
        api_key="k",
        model="m",
        sleep=sleep,
        base_url_setting="security.auth.baseUrl",
    )

    with pytest.raises(ProviderError, match=r"no-such-host\.invalid.*security\.auth\.baseUrl"):
        await collect(bad)
    await bad.aclose()

    assert len(sleep.delays) == 1


async def test_each_http_retry_says_which_attempt_of_how_many_comes_next(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(error_reply(500, "boom", retry_after=0), error_reply(503), reply("ok"))

    events = await collect(provider)

    assert [(r.attempt, r.max_attempts) for r in retries(events)] == [(2, 7), (3, 7)]
    assert retries(events)[0].describe() == "retrying in 0 s (attempt 2 of 7): HTTP 500: boom"


async def test_retry_after_over_a_minute_waits_a_minute(
    scripted_server: ScriptedServer, provider: OpenAIProvider, sleep: RecordingSleep
) -> None:
    """Regression (#18): a Retry-After of 300 s was waited in full."""
    scripted_server.enqueue(error_reply(429, "slow down", retry_after=300), reply("ok"))

    await collect(provider)

    assert sleep.delays == [60.0]


async def test_the_total_retry_time_is_bounded(scripted_server: ScriptedServer) -> None:
    """Regression (#18): 7 attempts each honouring Retry-After could wait ~30 min in all."""
    clock = FakeClock()
    provider = OpenAIProvider(
        base_url=scripted_server.base_url,
        api_key="k",
        model="m",
        retry=RetryPolicy(jitter=0.0, max_total_seconds=150.0),
        sleep=clock.sleep,
        clock=clock,
    )
    scripted_server.default = error_reply(429, "busy", retry_after=60)

    with pytest.raises(ProviderError, match=r"gave up after 3 attempts") as failure:
        await collect(provider)
    await provider.aclose()

    assert clock.slept == [60.0, 60.0]  # a third wait would pass the 150 s budget
    assert len(scripted_server.requests) == 3
    assert failure.value.status == 429


async def test_a_stream_of_keep_alive_comments_only_times_out(
    scripted_server: ScriptedServer, sleep: RecordingSleep
) -> None:
    """Regression (#18): a stream sending only keep-alive comments never ended."""
    provider = OpenAIProvider(
        base_url=scripted_server.base_url, api_key="k", model="m", timeout=0.3, sleep=sleep
    )
    scripted_server.default = Reply(raw_sse=[": keep-alive"] * 400, chunk_delay=0.05)

    with pytest.raises(InvalidStreamError) as failure:
        await collect(provider)
    await provider.aclose()

    assert failure.value.kind == "idle"
    assert "0.3 s" in str(failure.value)
    assert len(scripted_server.requests) == 3  # retried as an invalid stream


async def test_an_attempt_that_outlives_its_deadline_is_stopped(
    scripted_server: ScriptedServer, sleep: RecordingSleep
) -> None:
    """Regression (#18): a stream that trickles output forever was never cut off."""
    provider = OpenAIProvider(
        base_url=scripted_server.base_url,
        api_key="k",
        model="m",
        sleep=sleep,
        attempt_deadline=0.5,
    )
    scripted_server.default = reply(chunks=["."] * 400, chunk_delay=0.02)

    with pytest.raises(ProviderError) as failure:
        await collect(provider)
    await provider.aclose()

    assert "0.5 s" in str(failure.value)
    assert not failure.value.retryable
    assert len(scripted_server.requests) == 1


async def test_a_base_url_without_a_scheme_is_a_clear_non_retryable_error(
    sleep: RecordingSleep,
) -> None:
    broken = OpenAIProvider(base_url="127.0.0.1:9/v1", api_key="k", model="m", sleep=sleep)

    with pytest.raises(ProviderError, match="invalid model endpoint URL") as failure:
        await collect(broken)
    await broken.aclose()

    assert not failure.value.retryable
    assert sleep.delays == []


async def test_an_exhausted_script_fails_after_immediate_retries(
    scripted_server: ScriptedServer, provider: OpenAIProvider, sleep: RecordingSleep
) -> None:
    with pytest.raises(ProviderError, match="script exhausted") as failure:
        await collect(provider)

    assert failure.value.status == 500
    assert len(scripted_server.requests) == RetryPolicy().max_attempts
    assert set(sleep.delays) == {0.0}


# ----- malformed answers (#18): a provider error, retried as an invalid stream --------------

_ROLE = '{"choices":[{"index":0,"delta":{"role":"assistant"}}]}'
_STOP = '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
MALFORMED_STREAMS = {
    "delta is a string": [_ROLE, '{"choices":[{"index":0,"delta":"hello"}]}', _STOP],
    "tool_calls is a number": [_ROLE, '{"choices":[{"index":0,"delta":{"tool_calls":7}}]}', _STOP],
    "function is a string": [
        _ROLE,
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":"f"}]}}]}',
        _STOP,
    ],
    "usage has Infinity": [
        _ROLE,
        '{"choices":[{"index":0,"delta":{"content":"hi"}}]}',
        '{"choices":[],"usage":{"prompt_tokens":Infinity,"completion_tokens":1}}',
        _STOP,
    ],
    "usage has NaN": [
        _ROLE,
        '{"choices":[{"index":0,"delta":{"content":"hi"}}]}',
        '{"choices":[],"usage":{"prompt_tokens":NaN,"completion_tokens":1}}',
        _STOP,
    ],
}


@pytest.mark.parametrize("shape", sorted(MALFORMED_STREAMS))
async def test_a_malformed_chunk_is_retried_as_an_invalid_stream_then_named(
    scripted_server: ScriptedServer, provider: OpenAIProvider, shape: str
) -> None:
    """Regression (#18): these chunk shapes ended the turn with "internal error … This is a
    bug" (AttributeError, TypeError, OverflowError, ValueError) and no retry."""
    scripted_server.default = Reply(raw_sse=[*MALFORMED_STREAMS[shape], "[DONE]"])
    events: list[StreamEvent] = []

    with pytest.raises(InvalidStreamError) as failure:
        async for event in provider.stream(ask()):
            events.append(event)

    assert failure.value.kind == "malformed"
    assert "malformed" in str(failure.value)
    assert len(scripted_server.requests) == 3  # the first try and two stream retries
    assert [r.attempt for r in retries(events)] == [2, 3]


async def test_a_non_streaming_body_whose_message_is_a_string_is_a_malformed_answer(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """Regression (#18): a JSON answer with ``"message": "text"`` crashed with AttributeError."""
    body = {"choices": [{"index": 0, "message": "plain text", "finish_reason": "stop"}]}
    scripted_server.default = Reply(raw_body=json.dumps(body))

    with pytest.raises(InvalidStreamError) as failure:
        await collect(provider)

    assert failure.value.kind == "malformed"
    assert "choices[0].message" in str(failure.value)
    assert len(scripted_server.requests) == 3


async def test_an_inline_think_block_streams_as_thoughts_not_text(
    scripted_server: ScriptedServer, provider: OpenAIProvider
) -> None:
    scripted_server.enqueue(reply(chunks=["<thi", "nk>weigh it", " up</think>\n\n", "Answer."]))

    events = await collect(provider)

    assert "".join(e.text for e in events if isinstance(e, ThoughtDelta)) == "weigh it up"
    assert texts(events) == ["Answer."]
