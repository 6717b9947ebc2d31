"""A prompt cache for the scripted server, so tests and benchmarks see cache hits reported.

Real endpoints cache the prefix of a request and report how many prompt tokens came from the
cache. :class:`PromptCache` imitates the two kinds there are:

- ``"marked"`` (Anthropic, DashScope, OpenRouter to Anthropic): a request writes the prefix up to
  each block marked ``cache_control`` into the cache; a later request reads the longest cached
  prefix that ends at one of its block boundaries before its last mark. Unmarked requests
  neither read nor write.
- ``"automatic"`` (OpenAI, DeepSeek): every request writes its whole prompt, and reads the longest
  prefix an earlier request wrote, at any block boundary.

A request is seen as a list of blocks (tool declarations, then the system prompt, then each
message's parts); sizes are estimated at four characters a token, as the scripted usage is.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from cairn.testing.script import CHARS_PER_TOKEN

__all__ = ["Block", "CacheMode", "CacheUse", "PromptCache", "block_of", "openai_blocks"]

CacheMode: TypeAlias = Literal["marked", "automatic"]


@dataclass(frozen=True)
class Block:
    """One cacheable unit of a prompt: its canonical text, size and whether it is marked."""

    key: str
    chars: int
    marked: bool


@dataclass(frozen=True)
class CacheUse:
    """What one request got from the cache, in estimated tokens."""

    prompt_tokens: int  # the whole prompt
    cached_tokens: int  # read from the cache
    written_tokens: int  # newly written into the cache (Anthropic reports these too)


class PromptCache:
    """Prefix hashes the server has cached, shared by every request it answers."""

    def __init__(self, mode: CacheMode = "marked") -> None:
        self.mode = mode
        self._prefixes: dict[str, int] = {}  # prefix hash -> its size in characters
        self._lock = threading.Lock()

    def use(self, blocks: Sequence[Block]) -> CacheUse:
        """Read the longest cached prefix of ``blocks`` and write what this request caches."""
        hashes = _prefix_hashes(blocks)
        sizes = _prefix_sizes(blocks)
        total = sizes[-1] if sizes else 0
        marks = [i for i, block in enumerate(blocks) if block.marked]
        if self.mode == "marked":
            readable = range(marks[-1] + 1) if marks else range(0)
            writes = marks
        else:
            readable = range(len(blocks))
            writes = [len(blocks) - 1] if blocks else []
        with self._lock:
            cached = max((sizes[i] for i in readable if hashes[i] in self._prefixes), default=0)
            written = 0
            for i in writes:
                if hashes[i] not in self._prefixes:
                    self._prefixes[hashes[i]] = sizes[i]
                    written = max(written, sizes[i] - cached)
        return CacheUse(_tokens(total), _tokens(cached), _tokens(written))

    def clear(self) -> None:
        with self._lock:
            self._prefixes.clear()


def openai_blocks(body: Any) -> list[Block]:
    """The blocks of a chat-completions request body: tools, then each message's content."""
    if not isinstance(body, dict):
        return []
    blocks: list[Block] = []
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        blocks.append(block_of(tool))
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        rest = {k: v for k, v in message.items() if k != "content"}
        if isinstance(content, list):
            blocks.extend(block_of({**rest, **p}) for p in content if isinstance(p, dict))
        else:  # a string is the same block as one text part holding it
            text = content if isinstance(content, str) else ""
            blocks.append(block_of({**rest, "type": "text", "text": text}))
    return blocks


def block_of(value: dict[str, Any]) -> Block:
    """One block: its canonical form without the cache mark, its size, and whether marked."""
    marked = isinstance(value.get("cache_control"), dict)
    plain = {k: v for k, v in value.items() if k != "cache_control"}
    key = json.dumps(plain, sort_keys=True, ensure_ascii=False)
    text = plain.get("text")
    return Block(key, len(text) if isinstance(text, str) else len(key), marked)


def _prefix_hashes(blocks: Sequence[Block]) -> list[str]:
    digest = hashlib.sha256()
    hashes: list[str] = []
    for block in blocks:
        digest.update(block.key.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
        hashes.append(digest.copy().hexdigest())
    return hashes


def _prefix_sizes(blocks: Sequence[Block]) -> list[int]:
    sizes: list[int] = []
    total = 0
    for block in blocks:
        total += block.chars
        sizes.append(total)
    return sizes


def _tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN
