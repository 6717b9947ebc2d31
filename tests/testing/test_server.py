"""The scripted server, driven by plain HTTP clients (httpx and raw sockets)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import httpx
import pytest

from cairn.testing import (
    RecordedRequest,
    Reply,
    ScriptedServer,
    ToolCallSpec,
    error_reply,
    reply,
    tool_call,
    tool_calls,
)

from ..polling import eventually

CHAT = "/chat/completions"


def chat_body(text: str = "hello", *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {
        "model": "test-model",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}],
        "stream": stream,
        **extra,
    }


_SHARED_CLIENT = httpx.Client(trust_env=False)  # one client: creating one costs ~50 ms


def post(
    server: ScriptedServer,
    body: Any = None,
    *,
    purpose: str | None = None,
    session: str | None = None,
    client: httpx.Client = _SHARED_CLIENT,
) -> httpx.Response:
    headers = {}
    if purpose:
        headers["X-Cairn-Purpose"] = purpose
    if session:
        headers["X-Cairn-Session-Id"] = session
    payload = chat_body() if body is None else body
    return client.post(server.base_url + CHAT, json=payload, headers=headers)


def sse_payloads(text: str) -> list[str]:
    return [line[len("data: ") :] for line in text.split("\n") if line.startswith("data: ")]


def sse_chunks(text: str) -> list[dict[str, Any]]:
    return [json.loads(p) for p in sse_payloads(text) if p != "[DONE]"]


def answer_text(response: httpx.Response) -> str:
    """The assistant text of a streamed or non-streamed answer."""
    if response.headers["content-type"].startswith("text/event-stream"):
        deltas = [c["choices"][0]["delta"] for c in sse_chunks(response.text) if c["choices"]]
        return "".join(d.get("content") or "" for d in deltas)
    return str(response.json()["choices"][0]["message"]["content"])


def raw_exchange(server: ScriptedServer, data: bytes) -> bytes:
    """Send bytes on a fresh socket and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


# -- recording ---------------------------------------------------------------------------------


def test_records_method_path_headers_body_and_time(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply("hi"))
    before = time.time()
    post(scripted_server, purpose="main", session="s-1")
    after = time.time()

    [request] = scripted_server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["x-cairn-purpose"] == "main"
    assert request.headers["X-CAIRN-SESSION-ID"] == "s-1"
    assert request.body == chat_body()
    assert json.loads(request.raw) == chat_body()
    assert before <= request.received_at <= after
    assert request.index == 0


def test_recorded_request_exposes_the_chat_fields(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply("hi"))
    body = chat_body("what now?", max_tokens=300, temperature=0.3)
    body["tools"] = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    post(scripted_server, body, purpose="recap", session="abc")

    [request] = scripted_server.requests
    assert request.purpose == "recap"
    assert request.session_id == "abc"
    assert request.model == "test-model"
    assert request.system == "be brief"
    assert request.stream is True
    assert request.max_tokens == 300
    assert request.temperature == 0.3
    assert request.tool_names == ["read_file"]
    assert request.last_user_text() == "what now?"
    assert request.contains("brief")
    assert not request.contains("absent words")


async def test_a_request_is_recorded_before_it_is_answered(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.enqueue(reply("late", delay=5))
    async with httpx.AsyncClient(trust_env=False) as client:
        pending = asyncio.create_task(
            client.post(scripted_server.base_url + CHAT, json=chat_body())
        )
        recorded = await scripted_server.async_wait_for_requests(1)
        assert not pending.done()
        assert recorded[0].last_user_text() == "hello"
        pending.cancel()


def test_requests_for_filters_by_purpose(scripted_server: ScriptedServer) -> None:
    scripted_server.default = reply("ok")
    for purpose in ("main", "extract", "main"):
        post(scripted_server, purpose=purpose)

    assert [r.index for r in scripted_server.requests_for("main")] == [0, 2]
    assert [r.index for r in scripted_server.requests_for("extract")] == [1]


def test_wait_for_requests_times_out_naming_what_arrived(scripted_server: ScriptedServer) -> None:
    scripted_server.default = reply("ok")
    post(scripted_server, purpose="main")

    with pytest.raises(TimeoutError, match=r"expected 2 requests with purpose 'main'.*got 1"):
        scripted_server.wait_for_requests(2, purpose="main", timeout=0.05)


def test_wait_for_requests_returns_once_enough_arrived(scripted_server: ScriptedServer) -> None:
    scripted_server.default = reply("ok")
    post(scripted_server, purpose="dream")

    assert len(scripted_server.wait_for_requests(1, purpose="dream", timeout=1)) == 1


def test_clear_forgets_requests_and_queued_replies(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply("first"), reply("second"))
    post(scripted_server)
    scripted_server.clear()

    assert scripted_server.requests == []
    assert scripted_server.pending_replies == 0
    assert post(scripted_server).status_code == 500


# -- choosing a reply --------------------------------------------------------------------------


def test_queued_replies_are_played_in_order(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply("one"), reply("two"))

    assert [answer_text(post(scripted_server)) for _ in range(2)] == ["one", "two"]


def test_a_purpose_queue_is_used_before_the_any_queue(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply("for anyone"))
    scripted_server.enqueue(reply("for the recap"), purpose="recap")

    assert answer_text(post(scripted_server, purpose="recap")) == "for the recap"
    assert answer_text(post(scripted_server, purpose="main")) == "for anyone"


def test_a_session_queue_is_used_before_a_purpose_queue(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply("any main"), purpose="main")
    scripted_server.enqueue(reply("session main"), purpose="main", session_id="s-2")

    assert answer_text(post(scripted_server, purpose="main", session="s-1")) == "any main"
    assert answer_text(post(scripted_server, purpose="main", session="s-2")) == "session main"


def test_the_handler_is_asked_first_and_none_falls_through(
    scripted_server: ScriptedServer,
) -> None:
    def handler(request: RecordedRequest) -> Reply | None:
        return reply("from the handler") if request.contains("special") else None

    scripted_server.handler = handler
    scripted_server.enqueue(reply("from the queue"))

    assert answer_text(post(scripted_server, chat_body("special"))) == "from the handler"
    assert answer_text(post(scripted_server, chat_body("ordinary"))) == "from the queue"


def test_an_async_handler_is_awaited(scripted_server: ScriptedServer) -> None:
    async def handler(request: RecordedRequest) -> Reply:
        await asyncio.sleep(0)
        return reply(f"request {request.index}")

    scripted_server.handler = handler

    assert answer_text(post(scripted_server)) == "request 0"


def test_the_default_answers_when_nothing_is_queued(scripted_server: ScriptedServer) -> None:
    scripted_server.default = reply("default answer")
    scripted_server.enqueue(reply("queued"))

    assert [answer_text(post(scripted_server)) for _ in range(3)] == [
        "queued",
        "default answer",
        "default answer",
    ]


def test_a_callable_default_sees_the_request(scripted_server: ScriptedServer) -> None:
    scripted_server.default = lambda request: reply(request.last_user_text().upper())

    assert answer_text(post(scripted_server, chat_body("shout"))) == "SHOUT"


def test_an_exhausted_script_answers_500_with_retry_after_zero(
    scripted_server: ScriptedServer,
) -> None:
    response = post(scripted_server, purpose="extract")

    assert response.status_code == 500
    assert response.headers["retry-after"] == "0"
    assert "script exhausted" in response.json()["error"]["message"]
    assert "'extract'" in scripted_server.errors[0]


def test_a_handler_exception_is_a_500_and_the_server_keeps_serving(
    scripted_server: ScriptedServer,
) -> None:
    def handler(request: RecordedRequest) -> Reply:
        if request.index == 0:
            raise ValueError("broken script")
        return reply("recovered")

    scripted_server.handler = handler

    failed = post(scripted_server)
    assert failed.status_code == 500
    assert "ValueError: broken script" in failed.json()["error"]["message"]
    assert answer_text(post(scripted_server)) == "recovered"


def test_a_handler_returning_a_non_reply_is_a_500(scripted_server: ScriptedServer) -> None:
    scripted_server.handler = lambda request: "just a string"  # type: ignore[assignment,return-value]

    response = post(scripted_server)

    assert response.status_code == 500
    assert "not a Reply" in response.json()["error"]["message"]


# -- the answers -------------------------------------------------------------------------------


def test_a_streamed_answer_has_the_reference_shape(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(
        Reply(
            chunks=["Hel", "lo"],
            reasoning="thinking",
            tool_calls=[ToolCallSpec("read_file", {"path": "notes/a-long-file-name.md"})],
        )
    )
    response = post(scripted_server)

    assert response.headers["content-type"] == "text/event-stream"
    payloads = sse_payloads(response.text)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert deltas[0] == {"role": "assistant"}
    assert deltas[1] == {"reasoning_content": "thinking"}
    assert [d["content"] for d in deltas[2:4]] == ["Hel", "lo"]
    opening = deltas[4]["tool_calls"][0]
    assert opening == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_file", "arguments": ""},
    }
    fragments = [d["tool_calls"][0]["function"]["arguments"] for d in deltas[5:-1]]
    assert 2 <= len(fragments) <= 3
    assert json.loads("".join(fragments)) == {"path": "notes/a-long-file-name.md"}
    final = chunks[-1]
    assert final["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
    assert final["usage"]["total_tokens"] == (
        final["usage"]["prompt_tokens"] + final["usage"]["completion_tokens"]
    )
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_the_answer_uses_the_requested_model_unless_the_reply_names_one(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.enqueue(reply("a"), reply("b", model="other-model"))

    first, second = (sse_chunks(post(scripted_server).text)[0] for _ in range(2))

    assert first["model"] == "test-model"
    assert second["model"] == "other-model"


def test_scripted_usage_is_sent_verbatim(scripted_server: ScriptedServer) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 7, "total_tokens": 1007}
    scripted_server.enqueue(reply("ok", usage=usage))

    assert sse_chunks(post(scripted_server).text)[-1]["usage"] == usage


def test_tool_calls_without_ids_get_distinct_ids(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(tool_calls(ToolCallSpec("glob"), ToolCallSpec("grep_search")))
    scripted_server.enqueue(tool_call("glob", {"pattern": "*"}, id="mine"))

    ids = []
    for _ in range(2):
        deltas = [c["choices"][0]["delta"] for c in sse_chunks(post(scripted_server).text)]
        ids += [d["tool_calls"][0]["id"] for d in deltas if "id" in d.get("tool_calls", [{}])[0]]

    assert ids == ["call_1", "call_2", "mine"]


def test_a_non_streaming_request_gets_one_completion_object(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.enqueue(
        Reply(text="done", reasoning="why", tool_calls=[ToolCallSpec("glob", {"pattern": "*.py"})])
    )
    response = post(scripted_server, chat_body(stream=False))

    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "done"
    assert choice["message"]["reasoning_content"] == "why"
    call = choice["message"]["tool_calls"][0]
    assert call["function"] == {"name": "glob", "arguments": '{"pattern": "*.py"}'}
    assert body["usage"]["prompt_tokens"] > 0


def test_an_error_reply_has_the_openai_error_shape(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(error_reply(429, "slow down", retry_after=2))
    response = post(scripted_server)

    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json() == {
        "error": {"message": "slow down", "type": "rate_limit_error", "code": 429}
    }


def test_omit_finish_ends_the_stream_cleanly_without_a_finish_reason(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.enqueue(reply("partial", omit_finish=True))
    text = post(scripted_server).text

    assert sse_payloads(text)[-1] == "[DONE]"
    reasons = [c["choices"][0]["finish_reason"] for c in sse_chunks(text) if c["choices"]]
    assert reasons == [None, None]


def test_raw_sse_lines_are_sent_verbatim(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(Reply(raw_sse=['{"not": "a chunk"}', ": a comment", "[DONE]"]))

    assert (
        post(scripted_server).text == 'data: {"not": "a chunk"}\n\n: a comment\n\ndata: [DONE]\n\n'
    )


def test_drop_after_chunks_cuts_the_connection_mid_stream(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.enqueue(reply(chunks=["one", "two", "three"], drop_after_chunks=2))
    received: list[str] = []

    with (
        httpx.Client(trust_env=False) as client,
        client.stream("POST", scripted_server.base_url + CHAT, json=chat_body()) as response,
        pytest.raises(httpx.RemoteProtocolError),
    ):
        for line in response.iter_lines():
            received.append(line)

    deltas = [json.loads(p)["choices"][0]["delta"] for p in sse_payloads("\n".join(received))]
    assert deltas == [{"role": "assistant"}, {"content": "one"}, {"content": "two"}]


def test_drop_on_a_non_streaming_request_closes_without_an_answer(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.enqueue(reply("never sent", drop_after_chunks=0))

    with pytest.raises(httpx.RemoteProtocolError):
        post(scripted_server, chat_body(stream=False))


async def test_a_delayed_reply_does_not_hold_up_other_connections(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.enqueue(reply("slow", delay=30), purpose="slow")
    scripted_server.enqueue(reply("fast"), purpose="fast")
    url = scripted_server.base_url + CHAT
    async with httpx.AsyncClient(trust_env=False) as client:
        slow = asyncio.create_task(
            client.post(url, json=chat_body(), headers={"X-Cairn-Purpose": "slow"})
        )
        await scripted_server.async_wait_for_requests(1, purpose="slow")
        fast = await client.post(url, json=chat_body(), headers={"X-Cairn-Purpose": "fast"})

        assert answer_text(fast) == "fast"
        assert not slow.done()
        slow.cancel()


async def test_many_concurrent_requests_are_all_answered_and_recorded(
    scripted_server: ScriptedServer,
) -> None:
    """(The client waits as long as a loaded machine needs: httpx's default 5 s to connect ran
    out with 100 connections opening at once beside a busy test run.)"""
    scripted_server.default = lambda request: reply(f"answer for {request.session_id}")
    url = scripted_server.base_url + CHAT

    async def one(client: httpx.AsyncClient, n: int) -> str:
        response = await client.post(url, json=chat_body(), headers={"X-Cairn-Session-Id": str(n)})
        return answer_text(response)

    async with httpx.AsyncClient(
        trust_env=False, limits=httpx.Limits(max_connections=100), timeout=60
    ) as client:
        answers = await asyncio.gather(*(one(client, n) for n in range(100)))

    assert answers == [f"answer for {n}" for n in range(100)]
    assert sorted(r.index for r in scripted_server.requests) == list(range(100))


# -- HTTP --------------------------------------------------------------------------------------


def test_one_client_reuses_its_connection(scripted_server: ScriptedServer) -> None:
    scripted_server.default = reply("ok")
    with httpx.Client(trust_env=False) as client:
        for _ in range(3):
            post(scripted_server, client=client)
    with httpx.Client(trust_env=False) as other:
        post(scripted_server, client=other)

    connections = [r.connection for r in scripted_server.requests]
    assert connections[0] == connections[1] == connections[2] != connections[3]


def test_a_chunked_request_body_is_read(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply("ok"))
    pieces = [b'{"model": "m", ', b'"messages": [], ', b'"stream": false}']

    response = _SHARED_CLIENT.post(scripted_server.base_url + CHAT, content=iter(pieces))

    assert response.status_code == 200
    assert scripted_server.requests[0].body == {"model": "m", "messages": [], "stream": False}


def test_invalid_json_is_a_400_and_still_recorded(scripted_server: ScriptedServer) -> None:
    response = _SHARED_CLIENT.post(scripted_server.base_url + CHAT, content=b"{not json")

    assert response.status_code == 400
    assert "invalid JSON" in response.json()["error"]["message"]
    [request] = scripted_server.requests
    assert request.body is None
    assert request.raw == b"{not json"


def test_a_body_over_10_mib_is_a_413(scripted_server: ScriptedServer) -> None:
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        f"Content-Length: {10 * 1024 * 1024 + 1}\r\nExpect: 100-continue\r\n\r\n"
    )

    answer = raw_exchange(scripted_server, head.encode())

    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"Connection: close" in answer


def test_a_malformed_request_line_is_a_400(scripted_server: ScriptedServer) -> None:
    answer = raw_exchange(scripted_server, b"NONSENSE\r\n\r\n")

    assert answer.startswith(b"HTTP/1.1 400 ")


def test_an_unknown_path_is_a_404_recorded_apart_from_chat_requests(
    scripted_server: ScriptedServer,
) -> None:
    response = _SHARED_CLIENT.post(scripted_server.base_url + "/embeddings", json={})

    assert response.status_code == 404
    assert response.json()["error"]["code"] == 404
    assert scripted_server.requests == []
    assert scripted_server.other_requests[0].path == "/v1/embeddings"


def test_the_model_list_answers_get_and_head(scripted_server: ScriptedServer) -> None:
    listed = _SHARED_CLIENT.get(scripted_server.base_url + "/models")
    head = _SHARED_CLIENT.head(scripted_server.base_url + "/models")

    assert [m["id"] for m in listed.json()["data"]] == ["scripted-model"]
    assert head.status_code == 200
    assert head.content == b""


# -- lifecycle ---------------------------------------------------------------------------------


def test_base_url_points_at_loopback_v1() -> None:
    with ScriptedServer() as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"


def test_base_url_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not been started"):
        _ = ScriptedServer().base_url


def test_starting_twice_is_an_error(scripted_server: ScriptedServer) -> None:
    with pytest.raises(RuntimeError, match="already running"):
        scripted_server.start()


def test_stop_closes_the_listening_socket() -> None:
    server = ScriptedServer(reply("ok")).start()
    url = server.base_url
    server.stop()
    server.stop()

    with pytest.raises(httpx.ConnectError):
        _SHARED_CLIENT.post(url + CHAT, json=chat_body())


async def test_works_as_an_async_context_manager() -> None:
    async with (
        ScriptedServer(reply("async ok")) as server,
        httpx.AsyncClient(trust_env=False) as client,
    ):
        response = await client.post(server.base_url + CHAT, json=chat_body())

    assert answer_text(response) == "async ok"


def test_a_client_hanging_up_mid_reply_is_recorded_as_dropped(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.enqueue(Reply(chunks=["tick "] * 100, chunk_delay=0.02))
    request = (
        f"POST /v1{CHAT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(json.dumps(chat_body()))}\r\n\r\n{json.dumps(chat_body())}"
    ).encode()
    with socket.create_connection(("127.0.0.1", scripted_server.port), timeout=5) as sock:
        sock.sendall(request)
        assert sock.recv(1024)  # the reply has started

    assert eventually(lambda: bool(scripted_server.dropped))
    assert [r.index for r in scripted_server.dropped] == [0]


def test_a_completed_reply_is_not_recorded_as_dropped(scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply("done"))

    assert answer_text(post(scripted_server)) == "done"
    assert scripted_server.dropped == []
