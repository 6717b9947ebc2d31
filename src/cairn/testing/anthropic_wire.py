"""How a :class:`~cairn.testing.script.Reply` looks on the Anthropic Messages wire.

The scripted server answers ``POST .../v1/messages`` with these events, so the same script
drives the OpenAI and the Anthropic provider. Reasoning becomes a ``thinking`` block signed by
the server; :func:`request_problem` checks a request as strictly as the real API does (the
alternation of tool calls and results, signatures it issued, sampling with thinking, at most four
cache breakpoints) and names what is wrong in a 400, so a test sees the mistakes the API would
refuse.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from cairn.testing.cache import Block, CacheUse, block_of
from cairn.testing.script import Reply
from cairn.testing.wire import ERROR_TYPES, ReplyContext, StreamPlan, argument_fragments

__all__ = [
    "anthropic_blocks",
    "anthropic_error_body",
    "anthropic_message",
    "anthropic_stream",
    "anthropic_usage",
    "request_problem",
    "signature_for",
]

MAX_CACHE_BREAKPOINTS = 4  # the API refuses more blocks with cache_control
MIN_THINKING_BUDGET = 1024
_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_ERROR_TYPES = {**ERROR_TYPES, 529: "overloaded_error"}  # the API's own overload status
_BLOCK_TYPES = {
    "user": {"text", "image", "tool_result", "document"},
    "assistant": {"text", "tool_use", "thinking", "redacted_thinking"},
}


def signature_for(reasoning: str, request_index: int) -> str:
    """The signature the server gives a thinking block (it accepts only those it issued)."""
    digest = hashlib.sha256(f"{request_index}\x00{reasoning}".encode()).hexdigest()
    return f"sig-{digest[:32]}"


def anthropic_usage(ctx: ReplyContext, cache: CacheUse | None, reply: Reply) -> dict[str, Any]:
    """The reply's usage in the API's shape (prompt tokens split by cache use)."""
    scripted = reply.usage or {}
    if "input_tokens" in scripted or "output_tokens" in scripted:
        return dict(scripted)  # already in this wire's shape: sent verbatim
    prompt = int(ctx.usage.get("prompt_tokens", 0))
    output = int(ctx.usage.get("completion_tokens", 0))
    read = cache.cached_tokens if cache else _cached(ctx.usage)
    written = cache.written_tokens if cache else 0
    return {
        "input_tokens": max(0, prompt - read - written),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
        "output_tokens": output,
    }


def _cached(usage: Mapping[str, Any]) -> int:
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else 0
    return int(value) if isinstance(value, int) else 0


def anthropic_stream(
    reply: Reply, ctx: ReplyContext, usage: Mapping[str, Any], signature: str
) -> StreamPlan:
    """The SSE frames of a streamed reply (``event: …`` with its ``data: …``)."""
    if reply.raw_sse is not None:
        payloads = list(reply.raw_sse)
        cut = reply.drop_after_chunks
        return StreamPlan(payloads if cut is None else payloads[:cut], drop=cut is not None)
    start_usage = {**usage, "output_tokens": 1}
    frames = [_frame("message_start", {"message": _message_shell(ctx, start_usage)})]
    deltas = 0
    for frame, is_delta in _content_frames(reply, ctx, signature):
        if is_delta and reply.drop_after_chunks is not None and deltas >= reply.drop_after_chunks:
            return StreamPlan(frames, drop=True)
        deltas += is_delta
        frames.append(frame)
    if reply.drop_after_chunks is not None:
        return StreamPlan(frames, drop=True)
    stop = None if reply.omit_finish else _stop_reason(reply)
    delta = {"stop_reason": stop, "stop_sequence": None}
    frames.append(
        _frame(
            "message_delta", {"delta": delta, "usage": {"output_tokens": usage["output_tokens"]}}
        )
    )
    frames.append(_frame("message_stop", {}))
    return StreamPlan(frames, drop=False)


def _content_frames(reply: Reply, ctx: ReplyContext, signature: str) -> Iterator[tuple[str, bool]]:
    index = 0
    if reply.reasoning:
        yield _start(index, {"type": "thinking", "thinking": "", "signature": ""}), False
        yield _delta(index, {"type": "thinking_delta", "thinking": reply.reasoning}), True
        yield _delta(index, {"type": "signature_delta", "signature": signature}), False
        yield _frame("content_block_stop", {"index": index}), False
        index += 1
    if reply.content_chunks:
        yield _start(index, {"type": "text", "text": ""}), False
        for chunk in reply.content_chunks:
            yield _delta(index, {"type": "text_delta", "text": chunk}), True
        yield _frame("content_block_stop", {"index": index}), False
        index += 1
    for spec, call_id in zip(reply.tool_calls, ctx.call_ids, strict=True):
        opening = {"type": "tool_use", "id": call_id, "name": spec.name, "input": {}}
        yield _start(index, opening), False
        for fragment in argument_fragments(spec.arguments):
            yield _delta(index, {"type": "input_json_delta", "partial_json": fragment}), True
        yield _frame("content_block_stop", {"index": index}), False
        index += 1


def anthropic_message(
    reply: Reply, ctx: ReplyContext, usage: Mapping[str, Any], signature: str
) -> dict[str, Any]:
    """A non-streamed ``message`` object."""
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": signature})
    if reply.content is not None:
        content.append({"type": "text", "text": reply.content})
    for spec, call_id in zip(reply.tool_calls, ctx.call_ids, strict=True):
        try:
            arguments = json.loads(spec.arguments)
        except ValueError:
            arguments = {"raw": spec.arguments}
        content.append({"type": "tool_use", "id": call_id, "name": spec.name, "input": arguments})
    message = _message_shell(ctx, dict(usage))
    message.update(content=content, stop_reason=None if reply.omit_finish else _stop_reason(reply))
    return message


def anthropic_error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def anthropic_blocks(body: Any) -> list[Block]:
    """The cacheable blocks of a Messages request: tools, system, then each message's blocks."""
    if not isinstance(body, dict):
        return []
    blocks = [block_of(t) for t in _list(body.get("tools")) if isinstance(t, dict)]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(block_of({"type": "text", "text": system}))
    blocks.extend(block_of(b) for b in _list(system) if isinstance(b, dict))
    for message in _list(body.get("messages")):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        role = {"role": message.get("role")}
        if isinstance(content, str):
            blocks.append(block_of({**role, "type": "text", "text": content}))
        blocks.extend(block_of({**role, **b}) for b in _list(content) if isinstance(b, dict))
    return blocks


def request_problem(body: Any, issued: Collection[str]) -> str | None:
    """What the real API would refuse in this request (with a 400), or ``None``."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    for name, kind in (("model", str), ("max_tokens", int), ("messages", list)):
        if not isinstance(body.get(name), kind):
            return f"{name}: Field required"
    messages: list[Any] = body["messages"]
    if not messages:
        return "messages: at least one message is required"
    return _message_problem(messages, issued) or _thinking_problem(body) or _cache_problem(body)


def _message_problem(messages: Sequence[Any], issued: Collection[str]) -> str | None:
    if not isinstance(messages[0], dict) or messages[0].get("role") != "user":
        return "messages: the first message must use the `user` role"
    previous_calls: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _BLOCK_TYPES:
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        role = message["role"]
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            return f"messages.{i}.content: Input should be a string or a list of blocks"
        for j, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in _BLOCK_TYPES[role]:
                return f"messages.{i}.content.{j}: unexpected block type {kind!r} for {role}"
            if kind == "thinking" and block.get("signature") not in issued:
                return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
        if role == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            missing = sorted(previous_calls - set(results))
            if missing:
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}"
                )
            if any(r not in previous_calls for r in results):
                return f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks"
            kinds = [b.get("type") for b in blocks]
            if (
                "tool_result" in kinds
                and kinds.index("tool_result") > 0
                and any(k != "tool_result" for k in kinds[: kinds.index("tool_result")])
            ):
                return f"messages.{i}: `tool_result` blocks must come first in the content"
            previous_calls = set()
        else:
            previous_calls = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
    return None  # calls in a final assistant message (a prefill) are the caller's business


def _thinking_problem(body: dict[str, Any]) -> str | None:
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
        return f"thinking.budget_tokens: Input should be at least {MIN_THINKING_BUDGET}"
    if body["max_tokens"] <= budget:
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    if "temperature" in body or "top_p" in body:
        return "`temperature` and `top_p` may not be set when thinking is enabled"
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    return None


def _cache_problem(body: dict[str, Any]) -> str | None:
    marks = sum(1 for block in anthropic_blocks(body) if block.marked)
    if marks > MAX_CACHE_BREAKPOINTS:
        return (
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {marks}."
        )
    return None


def _message_shell(ctx: ReplyContext, usage: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": ctx.completion_id.replace("chatcmpl", "msg"),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": dict(usage),
    }


def _stop_reason(reply: Reply) -> str:
    reason = reply.resolved_finish_reason
    return _STOP_REASONS.get(reason, reason)


def _start(index: int, block: dict[str, Any]) -> str:
    return _frame("content_block_start", {"index": index, "content_block": block})


def _delta(index: int, delta: dict[str, Any]) -> str:
    return _frame("content_block_delta", {"index": index, "delta": delta})


def _frame(event: str, data: dict[str, Any]) -> str:
    payload = json.dumps({"type": event, **data}, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {payload}"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
