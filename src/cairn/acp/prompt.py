"""An ACP ``session/prompt`` (a list of content blocks) as a session :class:`PromptRequest`.

The prompt text (what Recall and ``UserPromptSubmit`` see, and what decides whether the prompt
is a slash command) is the text blocks joined with a space, as in the reference. Files the user
attached are read (through the editor when it serves files) and sent to the model inline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from cairn.content import Part, Text
from cairn.debug_log import get_logger
from cairn.session.session import PromptRequest
from cairn.tools.base import FileSystem

__all__ = ["MAX_ATTACHED_FILE_CHARS", "build_prompt_request"]

MAX_ATTACHED_FILE_CHARS = 200_000  # of one attached file sent to the model
_log = get_logger("ACP")


async def build_prompt_request(blocks: Sequence[Any], fs: FileSystem) -> PromptRequest:
    texts = [b.text for b in blocks if isinstance(b, TextContentBlock)]
    text = " ".join(t for t in texts if t)
    if all(isinstance(b, TextContentBlock) for b in blocks):
        return PromptRequest(text=text)
    parts: list[Part] = []
    for block in blocks:
        part = await _part(block, fs)
        if part is not None:
            parts.append(part)
    return PromptRequest(text=text, parts=parts or [Text(text)])


async def _part(block: Any, fs: FileSystem) -> Part | None:
    if isinstance(block, TextContentBlock):
        return Text(block.text) if block.text else None
    if isinstance(block, EmbeddedResourceContentBlock):
        return _embedded(block.resource)
    if isinstance(block, ResourceContentBlock):
        return await _linked(block, fs)
    if isinstance(block, ImageContentBlock | AudioContentBlock):
        return Text(f"[{block.type} omitted: this agent reads text only]")
    return None


def _embedded(resource: TextResourceContents | BlobResourceContents) -> Part:
    if isinstance(resource, TextResourceContents):
        return _file_part(_display_path(resource.uri), resource.text)
    return Text(f"[binary attachment {resource.uri} omitted: this agent reads text only]")


async def _linked(link: ResourceContentBlock, fs: FileSystem) -> Part:
    path = _file_path(link.uri)
    if path is not None:
        try:
            return _file_part(str(path), await fs.read_text(path))
        except (OSError, UnicodeDecodeError) as exc:
            _log.info(f"attached {path} not readable: {exc}")
    return Text(f"@{path}" if path is not None else f"[{link.name}]({link.uri})")


def _file_part(path: str, text: str) -> Text:
    if len(text) > MAX_ATTACHED_FILE_CHARS:
        text = text[:MAX_ATTACHED_FILE_CHARS] + "\n[… truncated]"
    return Text(f'<file path="{path}">\n{text}\n</file>')


def _file_path(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if not parsed.scheme and uri.startswith("/"):
        return Path(uri)
    return None


def _display_path(uri: str) -> str:
    path = _file_path(uri)
    return str(path) if path is not None else uri
