"""The scripted server's prompt cache: marked prefixes are written and read, as real ones are."""

from __future__ import annotations

from typing import Any

from cairn.testing.cache import PromptCache, openai_blocks

MARK = {"type": "ephemeral"}
SYSTEM = {"role": "system", "content": "S" * 400}


def body(*user_texts: str, mark_last: bool = True) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": "S" * 400, "cache_control": MARK}]}
    ]
    for text in user_texts:
        messages.append({"role": "user", "content": text})
    if mark_last and len(messages) > 1:
        text = messages[-1]["content"]
        messages[-1]["content"] = [{"type": "text", "text": text, "cache_control": MARK}]
    return {"messages": messages}


def test_a_repeated_marked_prefix_is_read_from_the_cache() -> None:
    cache = PromptCache("marked")

    first = cache.use(openai_blocks(body("u" * 200)))
    second = cache.use(openai_blocks(body("u" * 200, "v" * 80)))

    assert (first.cached_tokens, first.written_tokens) == (0, 150)
    assert second.cached_tokens == 150  # system prompt and the first message: 600 characters
    assert second.prompt_tokens == 170


def test_an_unmarked_request_neither_reads_nor_writes() -> None:
    cache = PromptCache("marked")
    plain = {"messages": [SYSTEM, {"role": "user", "content": "u"}]}

    assert cache.use(openai_blocks(plain)).cached_tokens == 0
    assert cache.use(openai_blocks(plain)).cached_tokens == 0


def test_automatic_caching_reads_any_repeated_prefix() -> None:
    cache = PromptCache("automatic")
    plain = {"messages": [SYSTEM, {"role": "user", "content": "u"}]}
    longer = {"messages": [*plain["messages"], {"role": "user", "content": "w" * 40}]}

    cache.use(openai_blocks(plain))

    assert cache.use(openai_blocks(longer)).cached_tokens == 100
