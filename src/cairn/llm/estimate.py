"""Token counts estimated from text, for an answer whose real usage never arrived.

Endpoints report usage in the last chunk of a stream. An answer cut before it (loop protection
stopping a model that chants, a cancel) still cost the prompt and every streamed token; counting
it as nothing would hide that cost, so it is estimated at four characters a token.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from cairn.llm.types import ModelRequest, Usage

__all__ = ["CHARS_PER_TOKEN", "estimate_tokens", "estimated_usage"]

CHARS_PER_TOKEN = 4  # characters of English text or JSON per token, roughly


def estimate_tokens(texts: Iterable[str]) -> int:
    """The tokens ``texts`` hold, at :data:`CHARS_PER_TOKEN` characters a token."""
    return sum(len(text) for text in texts) // CHARS_PER_TOKEN


def estimated_usage(request: ModelRequest, output: Iterable[str]) -> Usage:
    """The usage of ``request`` whose answer streamed ``output`` before it was cut."""
    prompt: list[str] = [request.system or ""]
    prompt += [json.dumps(content.to_dict(), ensure_ascii=False) for content in request.contents]
    prompt += [json.dumps(dict(tool.parameters)) + tool.description for tool in request.tools]
    input_tokens, output_tokens = estimate_tokens(prompt), estimate_tokens(output)
    return Usage(input_tokens, output_tokens, input_tokens + output_tokens)
