"""How a :class:`~cairn.testing.script.Reply` looks on the OpenAI chat-completions wire."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cairn.testing.cache import CacheUse
from cairn.testing.script import CHARS_PER_TOKEN, Reply

__all__ = [
    "ERROR_TYPES",
    "ReplyContext",
    "StreamPlan",
    "argument_fragments",
    "cached_usage",
    "completion_body",
    "endless_text",
    "error_body",
    "error_type",
    "sse_frame",
    "stream_plan",
]

DONE = "[DONE]"
MAX_ARGUMENT_FRAGMENTS = 3  # tool-call arguments arrive in up to 3 pieces, to exercise assembly
ENDLESS_TOKENS_PER_CHUNK = 16  # tokens of an endless reply's text per stream chunk
_ENDLESS_TOKENS = 4096  # distinct four-character tokens before an endless text starts over
_SSE_FIELD_PREFIXES = ("data:", "event:", "id:", "retry:", ":")
ERROR_TYPES = {  # the error "type" an HTTP status carries in an error body
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}


@dataclass(frozen=True)
class ReplyContext:
    """What a rendered reply needs to know besides the reply itself."""

    completion_id: str
    created: int
    model: str
    call_ids: Sequence[str]  # one per tool call, already resolved
    usage: dict[str, Any]
    room: int | None = None  # tokens the model may generate (max_tokens, the window); None: any


@dataclass(frozen=True)
class StreamPlan:
    """The SSE payloads to send, and whether to cut the connection after them. An endless
    reply's payloads are an iterator (without a bound, an infinite one)."""

    payloads: Iterable[str]
    drop: bool


def stream_plan(reply: Reply, ctx: ReplyContext) -> StreamPlan:
    """The ``data:`` payloads of a streamed reply (reference §13 shape)."""
    if reply.raw_sse is not None:
        return _cut(list(reply.raw_sse), reply.drop_after_chunks)
    if reply.endless:
        return StreamPlan(_endless_payloads(reply, ctx), drop=False)
    role = _chunk(ctx, {"role": "assistant"})
    deltas = [_chunk(ctx, delta) for delta in _deltas(reply, ctx.call_ids)]
    if reply.drop_after_chunks is not None:
        return StreamPlan([role, *deltas[: reply.drop_after_chunks]], drop=True)
    if reply.omit_finish:
        usage_only = _dump({**_envelope(ctx), "choices": [], "usage": ctx.usage})
        return StreamPlan([role, *deltas, usage_only, DONE], drop=False)
    final = _chunk(ctx, {}, finish_reason=reply.resolved_finish_reason, usage=ctx.usage)
    return StreamPlan([role, *deltas, final, DONE], drop=False)


def endless_text(start: int, count: int) -> str:
    """``count`` tokens of an endless reply from token ``start``: four characters each, no
    fifty-character stretch repeated within 16 k characters (no loop to detect)."""
    return "".join(f"{n % _ENDLESS_TOKENS:03x} " for n in range(start, start + count))


def _endless_payloads(reply: Reply, ctx: ReplyContext) -> Iterator[str]:
    yield _chunk(ctx, {"role": "assistant"})
    for delta in _deltas(reply, ctx.call_ids):
        yield _chunk(ctx, delta)
    generated = 0
    while ctx.room is None or generated < ctx.room:
        count = ENDLESS_TOKENS_PER_CHUNK
        if ctx.room is not None:
            count = min(count, ctx.room - generated)
        yield _chunk(ctx, {"content": endless_text(generated, count)})
        generated += count
    usage = dict(ctx.usage)
    usage["completion_tokens"] = generated + len(reply.content or "") // CHARS_PER_TOKEN
    usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage["completion_tokens"]
    yield _chunk(ctx, {}, finish_reason="length", usage=usage)
    yield DONE


def _cut(payloads: list[str], after: int | None) -> StreamPlan:
    if after is None:
        return StreamPlan(payloads, drop=False)
    return StreamPlan(payloads[:after], drop=True)


def _deltas(reply: Reply, call_ids: Sequence[str]) -> Iterator[dict[str, Any]]:
    if reply.reasoning:
        yield {"reasoning_content": reply.reasoning}
    for text in reply.content_chunks:
        yield {"content": text}
    for index, (spec, call_id) in enumerate(zip(reply.tool_calls, call_ids, strict=True)):
        opening = {"index": index, "id": call_id, "type": "function"}
        yield {"tool_calls": [{**opening, "function": {"name": spec.name, "arguments": ""}}]}
        for fragment in argument_fragments(spec.arguments):
            yield {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}


def argument_fragments(arguments: str) -> list[str]:
    """Split an arguments string into 2-3 pieces (1 when it is shorter than 2 characters)."""
    if len(arguments) < 2:
        return [arguments]
    count = MAX_ARGUMENT_FRAGMENTS if len(arguments) >= 3 * MAX_ARGUMENT_FRAGMENTS else 2
    step = -(-len(arguments) // count)  # ceiling division
    return [arguments[i : i + step] for i in range(0, len(arguments), step)]


def _envelope(ctx: ReplyContext) -> dict[str, Any]:
    return {
        "id": ctx.completion_id,
        "object": "chat.completion.chunk",
        "created": ctx.created,
        "model": ctx.model,
    }


def _chunk(
    ctx: ReplyContext,
    delta: dict[str, Any],
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> str:
    chunk: dict[str, Any] = {
        **_envelope(ctx),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return _dump(chunk)


def sse_frame(payload: str) -> bytes:
    """One SSE event: ``data: <payload>`` unless the payload already names its SSE field."""
    text = payload if payload.startswith(_SSE_FIELD_PREFIXES) else f"data: {payload}"
    return f"{text}\n\n".encode()


def completion_body(reply: Reply, ctx: ReplyContext) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` object."""
    content = reply.content
    if reply.endless:
        if ctx.room is None:
            raise ValueError("an endless reply to a non-streaming request needs max_tokens")
        content = (content or "") + endless_text(0, ctx.room)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": s.name, "arguments": s.arguments},
            }
            for s, call_id in zip(reply.tool_calls, ctx.call_ids, strict=True)
        ]
    finish = None if reply.omit_finish else reply.resolved_finish_reason
    return {
        "id": ctx.completion_id,
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": ctx.usage,
    }


def cached_usage(reply: Reply, use: CacheUse) -> dict[str, Any]:
    """OpenAI-style usage counts for a reply whose prompt was partly read from the cache."""
    prompt = max(1, use.prompt_tokens)
    completion = max(1, reply.output_chars() // CHARS_PER_TOKEN)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": min(use.cached_tokens, prompt)},
    }


def error_type(status: int) -> str:
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "server_error" if status >= 500 else "error"


def error_body(status: int, message: str) -> dict[str, Any]:
    """The OpenAI-style error object."""
    return {"error": {"message": message, "type": error_type(status), "code": status}}


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
