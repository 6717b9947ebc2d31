"""The Anthropic Messages request format: cairn's content model as ``system`` and ``messages``.

Thoughts go back as ``thinking`` blocks with the signature the API gave them (reasoning without
a signature, from another provider, cannot be sent and is left out); tool calls as ``tool_use``,
their results as ``tool_result`` blocks at the start of the next user message, with the images a
tool returned inside them. Cache breakpoints (``cache_control``) mark the system prompt, the
last tool declaration, the message that closed the previous request and the last message: the
prefix the next request repeats is then read from the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cairn.content import Content, FunctionCall, FunctionResponse, Image, Part, Text, Thought
from cairn.images import image_note
from cairn.llm.structured import RESPOND_TOOL, Strategy, instruction, respond_tool
from cairn.llm.types import ModelRequest, ToolDeclaration

__all__ = [
    "API_VERSION",
    "DEFAULT_MAX_TOKENS",
    "MIN_THINKING_BUDGET",
    "AnthropicOptions",
    "build_request_body",
    "to_anthropic_messages",
]

API_VERSION = "2023-06-01"  # the anthropic-version header the format follows
DEFAULT_MAX_TOKENS = 8192  # output budget when nothing sets one (the API requires a number)
MIN_THINKING_BUDGET = 1024  # the API's smallest extended-thinking budget
CONTINUATION = "(continued)"  # stands in for a missing first user message
_EPHEMERAL = {"type": "ephemeral"}


@dataclass(frozen=True)
class AnthropicOptions:
    """How requests are phrased: JSON by ``structured`` (``tool`` or ``prompt``), images or a
    note each, cache breakpoints, and the extended-thinking budget (``None``: off)."""

    structured: Strategy = "tool"
    images: bool = True
    cache: bool = True
    thinking_budget: int | None = None


def build_request_body(
    request: ModelRequest, options: AnthropicOptions | None = None
) -> dict[str, Any]:
    options = options or AnthropicOptions()
    system = request.system or ""
    tools = list(request.tools)
    schema = request.response_schema
    forced = schema is not None and options.structured == "tool"
    if schema is not None:
        rule = instruction(schema, "tool" if forced else "prompt")
        system = f"{system}\n\n{rule}" if system else rule
        if forced:
            tools.append(respond_tool(schema))
    thinking = _thinking_budget(request, options, forced)
    budget = request.max_output_tokens or DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": budget + (thinking or 0),
        "messages": to_anthropic_messages(request.contents, images=options.images),
        "stream": True,
    }
    if system:
        body["system"] = [{"type": "text", "text": system}]
    if tools:
        body["tools"] = [_tool(t) for t in tools]
    if forced:
        body["tool_choice"] = {"type": "tool", "name": RESPOND_TOOL}
    if thinking:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking}
    else:  # with thinking on, the API refuses any sampling setting
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
    if options.cache:
        _mark_breakpoints(body)
    return body


def _thinking_budget(request: ModelRequest, options: AnthropicOptions, forced: bool) -> int | None:
    """The thinking budget for this request: off for side queries and forced tool calls."""
    if not options.thinking_budget or not request.allow_thinking or forced:
        return None
    return max(MIN_THINKING_BUDGET, options.thinking_budget)


def _tool(tool: ToolDeclaration) -> dict[str, Any]:
    schema = dict(tool.parameters) or {"type": "object", "properties": {}}
    return {"name": tool.name, "description": tool.description, "input_schema": schema}


def to_anthropic_messages(
    contents: Sequence[Content], *, images: bool = True
) -> list[dict[str, Any]]:
    """Convert cairn content to Messages API ``messages``.

    Consecutive entries of one role are merged (the API wants them alternating); a call without
    its result in the next user message and a result without its call are dropped, since the API
    refuses both; the first message is a user message.
    """
    messages: list[dict[str, Any]] = []
    for content in contents:
        role = "assistant" if content.role == "model" else "user"
        blocks = (
            _assistant_blocks(content.parts)
            if role == "assistant"
            else _user_blocks(content.parts, images)
        )
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    messages = _paired(messages)
    for message in messages:
        if message["role"] == "user":  # tool results must open the message
            message["content"].sort(key=lambda b: b["type"] != "tool_result")
    if messages and messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUATION}]})
    return messages


def _assistant_blocks(parts: Sequence[Part]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    seen: set[str] = set()
    for part in parts:
        if isinstance(part, Thought) and part.signature:
            if part.redacted:
                blocks.append({"type": "redacted_thinking", "data": part.signature})
            else:
                blocks.append(
                    {"type": "thinking", "thinking": part.text, "signature": part.signature}
                )
        elif isinstance(part, Text) and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, FunctionCall) and part.id and part.id not in seen:
            seen.add(part.id)
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": dict(part.args)}
            )
    return blocks


def _user_blocks(parts: Sequence[Part], images: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, FunctionResponse):
            blocks.append(_tool_result(part, images))
        elif isinstance(part, Text) and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, Image):
            blocks.append(_image(part) if images else {"type": "text", "text": image_note(part)})
    return blocks


def _tool_result(part: FunctionResponse, images: bool) -> dict[str, Any]:
    text = part.model_text
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.id}
    if part.media:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        for image in part.media:
            content.append(_image(image) if images else {"type": "text", "text": image_note(image)})
        block["content"] = content
    else:
        block["content"] = text
    if part.is_error:
        block["is_error"] = True
    return block


def _image(image: Image) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image.mime_type, "data": image.data}
    return {"type": "image", "source": source}


def _paired(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep a ``tool_use`` only when the next message answers it, and only answered results."""
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = _result_ids(following) if following is not None else set()
            blocks = [
                b for b in message["content"] if b["type"] != "tool_use" or b["id"] in answered
            ]
        else:
            previous = out[-1] if out and out[-1]["role"] == "assistant" else None
            calls = (
                {b["id"] for b in previous["content"] if b["type"] == "tool_use"}
                if previous
                else set()
            )
            blocks = [
                b
                for b in message["content"]
                if b["type"] != "tool_result" or b["tool_use_id"] in calls
            ]
        if _has_content(blocks):
            message = {"role": message["role"], "content": blocks}
            if out and out[-1]["role"] == message["role"]:
                out[-1]["content"].extend(blocks)
            else:
                out.append(message)
    return out


def _result_ids(message: dict[str, Any]) -> set[str]:
    if message["role"] != "user":
        return set()
    return {b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"}


def _has_content(blocks: list[dict[str, Any]]) -> bool:
    """A message of thinking alone says nothing the API will take."""
    return any(b["type"] not in ("thinking", "redacted_thinking") for b in blocks)


def _mark_breakpoints(body: dict[str, Any]) -> None:
    """Put ``cache_control`` on up to four blocks: system, last tool, the previous request's
    last message, the last message."""
    if "system" in body:
        body["system"][-1]["cache_control"] = dict(_EPHEMERAL)
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = dict(_EPHEMERAL)
    messages = body["messages"]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for index in users[-2:]:
        _mark_last_block(messages[index])


def _mark_last_block(message: dict[str, Any]) -> None:
    for block in reversed(message["content"]):
        if block["type"] not in ("thinking", "redacted_thinking"):
            block["cache_control"] = dict(_EPHEMERAL)
            return
