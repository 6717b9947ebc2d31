"""The stdio transport answers bad input with JSON-RPC errors and keeps serving."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.acp.transport import INVALID_REQUEST, PARSE_ERROR, StdioTransport


class CollectingWriter:
    """A ByteWriter that keeps what was written."""

    def __init__(self) -> None:
        self.data = b""
        self.closed = False

    def write(self, data: bytes) -> None:
        self.data += data

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.data.splitlines()]


def transport_for(data: bytes, **kwargs: Any) -> tuple[StdioTransport, CollectingWriter]:
    reader = asyncio.StreamReader(limit=64)  # small: long lines are read in pieces
    reader.feed_data(data)
    reader.feed_eof()
    writer = CollectingWriter()
    return StdioTransport(reader, writer, **kwargs), writer


async def receive_all(transport: StdioTransport) -> list[dict[str, Any]]:
    received = []
    while (message := await transport.receive()) is not None:
        received.append(message)
    return received


REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


async def test_a_line_that_is_not_json_gets_a_parse_error_and_the_next_line_is_served() -> None:
    transport, writer = transport_for(b"this is not json\n" + json.dumps(REQUEST).encode() + b"\n")

    received = await receive_all(transport)

    assert received == [REQUEST]
    [error] = writer.messages()
    assert error["id"] is None
    assert error["error"]["code"] == PARSE_ERROR
    assert error["error"]["message"] == "Parse error"


async def test_invalid_utf8_gets_a_parse_error() -> None:
    transport, writer = transport_for(b'{"method": "\xff\xfe"}\n')

    assert await receive_all(transport) == []
    assert writer.messages()[0]["error"]["code"] == PARSE_ERROR


async def test_absurdly_nested_json_gets_a_parse_error() -> None:
    transport, writer = transport_for(b"[" * 100_000 + b"]" * 100_000 + b"\n")

    assert await receive_all(transport) == []
    assert writer.messages()[0]["error"]["code"] == PARSE_ERROR


@pytest.mark.parametrize(
    "line",
    [b"[1, 2]", b"42", b'"text"', b"null", b'{"jsonrpc": "2.0"}', b'{"method": "x", "params": 3}'],
)
async def test_json_that_is_not_one_message_is_an_invalid_request(line: bytes) -> None:
    transport, writer = transport_for(line + b"\n")

    assert await receive_all(transport) == []
    [error] = writer.messages()
    assert error["error"]["code"] == INVALID_REQUEST
    assert error["id"] is None


async def test_an_invalid_request_is_answered_with_its_own_id() -> None:
    transport, writer = transport_for(b'{"jsonrpc": "2.0", "id": 7, "method": 12}\n')

    assert await receive_all(transport) == []
    assert writer.messages()[0]["id"] == 7
    assert writer.messages()[0]["error"]["code"] == INVALID_REQUEST


async def test_an_over_long_line_is_refused_and_the_next_line_is_served() -> None:
    long_line = json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"t": "a" * 5000}})
    data = long_line.encode() + b"\n" + json.dumps(REQUEST).encode() + b"\n"
    transport, writer = transport_for(data, max_message_bytes=1000)

    received = await receive_all(transport)

    assert received == [REQUEST]
    assert writer.messages()[0]["error"]["code"] == INVALID_REQUEST
    assert "1000 bytes" in writer.messages()[0]["error"]["data"]["details"]


async def test_a_last_line_without_a_newline_is_still_read() -> None:
    transport, _writer = transport_for(json.dumps(REQUEST).encode())

    assert await receive_all(transport) == [REQUEST]


async def test_blank_lines_are_skipped_silently() -> None:
    transport, writer = transport_for(b"\n  \r\n" + json.dumps(REQUEST).encode() + b"\n")

    assert await receive_all(transport) == [REQUEST]
    assert writer.data == b""


async def test_messages_are_sent_as_one_json_line_each() -> None:
    transport, writer = transport_for(b"")

    await transport.send({"jsonrpc": "2.0", "method": "a", "params": {"text": "é\nnext"}})
    await transport.send({"jsonrpc": "2.0", "method": "b"})

    lines = writer.data.split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line)["method"] for line in lines[:-1]] == ["a", "b"]


async def test_sending_after_close_raises_connection_error() -> None:
    transport, writer = transport_for(b"")
    await transport.close()

    with pytest.raises(ConnectionError):
        await transport.send({"jsonrpc": "2.0", "method": "a"})
    assert writer.closed


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=200).filter(lambda b: b"\n" not in b), max_size=5))
def test_any_bytes_yield_messages_or_error_replies_never_an_exception(lines: list[bytes]) -> None:
    async def run() -> tuple[list[dict[str, Any]], CollectingWriter]:
        transport, writer = transport_for(b"\n".join(lines) + b"\n")
        return await receive_all(transport), writer

    received, writer = asyncio.run(run())

    assert all(isinstance(message, dict) for message in received)
    assert len(received) + len(writer.messages()) <= len(lines)


async def test_a_lone_surrogate_in_params_is_replaced_and_the_id_kept() -> None:
    """Regression (#18): a lone surrogate reached the session (and a surrogate id was never
    answered, its reply failing to encode)."""
    line = b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "x", "params": {"t": "a\\udfffb"}}'
    transport, writer = transport_for(line + b"\n")

    [message] = await receive_all(transport)
    await transport.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})

    assert message["params"] == {"t": "a\ufffdb"}
    assert message["id"] == "\ud800"
    assert writer.messages() == [{"jsonrpc": "2.0", "id": "\ud800", "result": {}}]


SURROGATE_TEXT = st.lists(st.characters(categories=["Cs"]) | st.characters(), max_size=8).map(
    "".join
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | SURROGATE_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SURROGATE_TEXT, inner, max_size=3),
    max_leaves=15,
)


@settings(max_examples=200, deadline=None)
@given(request_id=st.integers() | SURROGATE_TEXT, params=JSON_VALUES, depth=st.integers(0, 200))
def test_any_message_arrives_clean_or_is_answered_and_every_reply_encodes(
    request_id: Any, params: Any, depth: int
) -> None:
    for _ in range(depth):
        params = [params]
    message = {"jsonrpc": "2.0", "id": request_id, "method": "m", "params": params}

    async def run() -> tuple[list[dict[str, Any]], CollectingWriter]:
        transport, writer = transport_for(json.dumps(message).encode() + b"\n")
        received = await receive_all(transport)
        for each in received:
            await transport.send({"jsonrpc": "2.0", "id": each["id"], "result": each["params"]})
        return received, writer

    received, writer = asyncio.run(run())

    assert len(received) + len(writer.messages()) >= 1
    for each in received:
        json.dumps(each["params"], ensure_ascii=False).encode("utf-8")
    as_sent = json.loads(json.dumps(request_id))  # JSON joins an escaped surrogate pair
    assert [reply["id"] for reply in writer.messages()] == [as_sent]
