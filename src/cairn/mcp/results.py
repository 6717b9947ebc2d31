"""MCP results as what the model sees: a tool result, a resource's text, a prompt's messages."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import mcp.types as types

from cairn.content import Image, clip_text
from cairn.tools.base import ToolResult

__all__ = [
    "MAX_RESULT_CHARS",
    "content_text",
    "prompt_text",
    "resource_text",
    "tool_result",
]

MAX_RESULT_CHARS = 100_000  # what one MCP result may put in the model's context (~25k tokens)


def tool_result(result: types.CallToolResult, *, server: str, tool: str) -> ToolResult:
    """Text, structured content, resources and media blocks, and ``isError``, as a result."""
    text = content_text(result.content)
    structured = result.structuredContent
    if structured is not None and not text.strip():
        # Servers SHOULD send structured content as text too; only when they don't is it added.
        text = json.dumps(structured, ensure_ascii=False, default=str)
    text = _clip(text)
    media = tuple(
        Image(block.mimeType, block.data, source=f"{server}:{tool}")
        for block in result.content
        if isinstance(block, types.ImageContent)
    )
    if result.isError:
        return ToolResult(
            error=text or f"The MCP tool {tool} of server {server} reported an error.",
            display=f"{server}: {tool} failed",
            media=media,
        )
    return ToolResult(output=text, media=media)


def content_text(blocks: Sequence[Any]) -> str:
    """Each content block as text; images (passed on as media) and audio are named."""
    parts: list[str] = []
    for block in blocks:
        match block:
            case types.TextContent(text=text):
                parts.append(text)
            case types.ImageContent(mimeType=mime, data=data):
                parts.append(f"[image: {mime}, {_decoded_size(data)} bytes]")
            case types.AudioContent(mimeType=mime, data=data):
                parts.append(f"[audio: {mime}, {_decoded_size(data)} bytes]")
            case types.EmbeddedResource(resource=resource):
                parts.append(resource_text(resource))
            case types.ResourceLink(uri=uri, name=name, description=description):
                about = f" — {description}" if description else ""
                parts.append(f"[resource link: {name} <{uri}>{about}]")
            case _:
                parts.append(f"[unsupported content: {type(block).__name__}]")
    return "\n".join(parts)


def resource_text(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    """One resource's contents, tagged with its URI so the model knows what it reads."""
    mime = f' mimeType="{resource.mimeType}"' if resource.mimeType else ""
    if isinstance(resource, types.TextResourceContents):
        return f'<resource uri="{resource.uri}"{mime}>\n{resource.text}\n</resource>'
    size = _decoded_size(resource.blob)
    return f'<resource uri="{resource.uri}"{mime}>[binary, {size} bytes]</resource>'


def prompt_text(result: types.GetPromptResult) -> str:
    """A prompt's messages as one user prompt (assistant turns are labelled)."""
    parts: list[str] = []
    for message in result.messages:
        text = content_text([message.content])
        parts.append(text if message.role == "user" else f"[assistant]: {text}")
    return _clip("\n\n".join(parts))


def _clip(text: str) -> str:
    return clip_text(text, MAX_RESULT_CHARS, "\n[... {dropped} more characters were cut]")


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data)
