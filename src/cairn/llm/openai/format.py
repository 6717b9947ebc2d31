"""The OpenAI chat-completions request format: cairn's content model as ``messages``.

Shared by :class:`~cairn.llm.openai.OpenAIProvider` and the scripted in-process provider, so a
scripted test sees the body the real provider would send.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cairn.content import Content, FunctionCall, FunctionResponse, Image, Text, Thought
from cairn.images import image_note
from cairn.llm.request_json import ToolListEncoder
from cairn.llm.structured import (
    RESPOND_TOOL,
    Strategy,
    instruction,
    respond_tool,
    response_format,
)
from cairn.llm.types import ModelRequest, ToolDeclaration
from cairn.values import Value

__all__ = [
    "EPHEMERAL",
    "WireOptions",
    "build_request_body",
    "mark_cache_breakpoints",
    "to_openai_messages",
]

EPHEMERAL = {"type": "ephemeral"}  # the cache_control mark endpoints that cache prompts honour


class WireOptions(Value):
    """How the provider has chosen to phrase requests to its endpoint.

    ``structured``: how a request with a ``response_schema`` asks for JSON
    (:mod:`cairn.llm.structured`); ``images``: whether the model takes images (else each is a
    one-line note); ``cache``: whether to mark cache breakpoints for the endpoint;
    ``output_field``: the field carrying the output bound (``max_completion_tokens`` for the
    OpenAI models that refuse ``max_tokens``).
    """

    structured: Strategy = "json_schema"
    images: bool = True
    cache: bool = False
    output_field: str = "max_tokens"


def build_request_body(request: ModelRequest, options: WireOptions | None = None) -> dict[str, Any]:
    options = options or WireOptions()
    system = request.system
    tools = list(request.tools)
    schema = request.response_schema
    if schema is not None:
        rule = instruction(schema, options.structured)
        system = f"{system}\n\n{rule}" if system else rule
        if options.structured == "tool":
            tools.append(respond_tool(schema))
    body: dict[str, Any] = {
        "model": request.model,
        "messages": to_openai_messages(
            system, request.contents, images=options.images, cache=options.cache
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        # the declarations are the stable part of every request's prefix: marked for caching
        body["tools"] = _TOOLS(tools, {"cache_control": dict(EPHEMERAL)} if options.cache else None)
    if schema is not None and options.structured == "tool":
        body["tool_choice"] = {"type": "function", "function": {"name": RESPOND_TOOL}}
    if request.max_output_tokens is not None:
        body[options.output_field] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    wanted = response_format(schema, options.structured) if schema is not None else None
    if wanted is not None:
        body["response_format"] = wanted
    return body


def _tool(tool: ToolDeclaration) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        },
    }


_TOOLS = ToolListEncoder(_tool)  # each declaration's entry and JSON, made once


def to_openai_messages(
    system: str | None,
    contents: Sequence[Content],
    *,
    images: bool = True,
    cache: bool = False,
) -> list[dict[str, Any]]:
    """Convert cairn content to chat-completions messages.

    Function responses become ``tool`` messages right after the assistant message that issued the
    calls; images they returned and the text and images of the same user entry follow as one user
    message (a ``tool`` message carries text only). Images are ``image_url`` parts with data URIs,
    or a one-line note each when ``images`` is false (a text-only model). Calls without a response
    and responses without a call are dropped, since providers reject both. ``cache`` marks the
    system prompt and the last message as cache breakpoints (:func:`mark_cache_breakpoints`).
    """
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for content in contents:
        if content.role == "model":
            messages.append(_assistant_message(content))
            continue
        pieces: list[str | Image] = []
        for part in content.parts:
            if isinstance(part, FunctionResponse):
                messages.append(_tool_message(part, images))
                if images and part.media:
                    pieces.append(f"[The images below were returned by {part.name}.]")
                    pieces.extend(part.media)
            elif isinstance(part, Text) and part.text:
                pieces.append(part.text)
            elif isinstance(part, Image):
                pieces.append(part if images else image_note(part))
        if pieces:
            messages.append({"role": "user", "content": _user_content(pieces)})
    messages = _merge_assistants(_drop_orphans(_merge_assistants(messages)))
    if cache:
        mark_cache_breakpoints(messages)
    return messages


def _tool_message(part: FunctionResponse, images: bool) -> dict[str, Any]:
    text = part.model_text
    if not images and part.media:
        text = "\n".join([text, *(image_note(image) for image in part.media)])
    return {"role": "tool", "tool_call_id": part.id, "content": text}


def _user_content(pieces: Sequence[str | Image]) -> str | list[dict[str, Any]]:
    """Text alone as one string (what every endpoint takes); with images, a list of parts."""
    if all(isinstance(piece, str) for piece in pieces):
        return "\n\n".join(piece for piece in pieces if isinstance(piece, str))
    return [
        {"type": "text", "text": piece}
        if isinstance(piece, str)
        else {
            "type": "image_url",
            "image_url": {"url": f"data:{piece.mime_type};base64,{piece.data}"},
        }
        for piece in pieces
    ]


def mark_cache_breakpoints(messages: list[dict[str, Any]]) -> None:
    """Mark the system prompt and the last message ``cache_control: ephemeral``, in place.

    The prefix up to each mark is what an endpoint that honours the marks (DashScope, Anthropic
    models through OpenRouter) caches: the system prompt is stable across a session, and the last
    message closes the longest prefix the next request repeats. Text content becomes a list of
    parts, since the mark goes on a part.
    """
    marked = [m for m in messages[:1] if m["role"] == "system"]
    if messages and messages[-1] not in marked:
        marked.append(messages[-1])
    for message in marked:
        content = message.get("content")
        if isinstance(content, str) and content:
            mark = {"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}
            message["content"] = [mark]
        elif isinstance(content, list) and content and isinstance(content[-1], dict):
            content[-1] = {**content[-1], "cache_control": dict(EPHEMERAL)}


def _assistant_message(content: Content) -> dict[str, Any]:
    text = "".join(p.text for p in content.parts if isinstance(p, Text))
    reasoning = "".join(p.text for p in content.parts if isinstance(p, Thought))
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, part in enumerate(content.parts):
        if isinstance(part, FunctionCall):
            call_id = part.id or f"call_{i}"
            if call_id in seen:
                continue
            seen.add(call_id)
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": part.name, "arguments": json.dumps(dict(part.args))},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return message


def _merge_assistants(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for message in messages:
        previous = merged[-1] if merged else None
        if previous and previous["role"] == "assistant" == message["role"]:
            text = (previous.get("content") or "") + (message.get("content") or "")
            calls = previous.get("tool_calls", []) + message.get("tool_calls", [])
            previous["content"] = text or (None if calls else "")
            if calls:
                previous["tool_calls"] = calls
            if message.get("reasoning_content"):
                previous["reasoning_content"] = (
                    previous.get("reasoning_content", "") + message["reasoning_content"]
                )
        else:
            merged.append(message)
    return merged


def _drop_orphans(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep only tool calls answered by the tool messages right after them, and those answers."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message["role"] == "tool":
            continue  # not right after an assistant's calls: an orphan
        if message["role"] != "assistant" or not message.get("tool_calls"):
            out.append(message)
            continue
        replies: list[dict[str, Any]] = []
        while i < len(messages) and messages[i]["role"] == "tool":
            replies.append(messages[i])
            i += 1
        out.extend(_answered_calls(message, replies))
    return out


def _answered_calls(
    assistant: dict[str, Any], replies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The assistant message trimmed to its answered calls, followed by one answer per call."""
    call_ids = {call["id"] for call in assistant["tool_calls"]}
    answers: dict[str, dict[str, Any]] = {}
    for reply in replies:
        if reply["tool_call_id"] in call_ids:
            answers.setdefault(reply["tool_call_id"], reply)
    message = dict(assistant)
    calls = [call for call in assistant["tool_calls"] if call["id"] in answers]
    if calls:
        message["tool_calls"] = calls
        return [message, *(answers[call["id"]] for call in calls)]
    message.pop("tool_calls")
    if not message.get("content") and not message.get("reasoning_content"):
        return []
    message["content"] = message.get("content") or ""
    return [message]
