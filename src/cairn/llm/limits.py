"""Output bounds: how many tokens each kind of request may generate, and what a server says
when a bound does not fit it.

Every request carries ``max_tokens``: a model that never emits its end token (a weak local model
does) otherwise generates until the server's context is full, which on a 128 k window takes
hours. Each request kind (its ``X-Cairn-Purpose``) has a default bound; the user's
``model.generationConfig.maxOutputTokens`` entry for the kind wins, then the bound the caller
asked for (``samplingParams.max_tokens`` for the conversation, 300 for a recap), then the
default. An answer that reaches its bound ends with finish reason ``length``, and the session
says so.

A server that cannot take the bound says how many it can (OpenAI: "supports at most 4096
completion tokens"; vLLM: "maximum context length is 8192 tokens and your request has 7000 input
tokens"; Anthropic: "> 64000, which is the maximum allowed number of output tokens"): the
provider sends the request again once with that many (:func:`smaller_output_limit`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "DEFAULT_OUTPUT_TOKENS",
    "MIN_OUTPUT_TOKENS",
    "OUTPUT_TOKEN_LIMITS",
    "output_limit",
    "smaller_output_limit",
]

# The default output bound of each request kind (its X-Cairn-Purpose), in tokens; the settings
# schema names the same kinds (config.settings.OutputBounds).
OUTPUT_TOKEN_LIMITS: Mapping[str, int] = {
    "main": 8192,  # the conversation (Qwen Code caps it at 8000; Anthropic's wire had 8192)
    "subagent": 8192,  # an `agent` tool call's own conversation
    "extract": 4096,  # the memory extraction agent: short memory files
    "dream": 8192,  # consolidation rewrites several memory files
    "compress": 8192,  # the compression summary (a dense state snapshot)
    "recap": 300,  # one or two sentences
    "title": 64,  # a few words
    "recall-selector": 1024,  # a short JSON list of paths
    "forget": 2048,  # a JSON list of paths and reasons
    "task-checkpoint": 2048,  # the task checkpoint: short lists as one JSON object
    "web-fetch": 4096,  # an answer about one page
}
DEFAULT_OUTPUT_TOKENS = 4096  # a request of a kind not listed above
MIN_OUTPUT_TOKENS = 16  # a server's "at most N" below this is not worth another attempt

# What servers say when a request's output bound does not fit, case aside: (pattern, the group
# holding the largest bound it takes, or the window and the prompt's tokens). Kept as text:
# ``re`` compiles and caches each on the first refusal, not at every start-up.
_AT_MOST = (
    r"supports at most (\d+) completion tokens",  # OpenAI
    r"> ?(\d+), which is the maximum allowed number of output tokens",
    r"max_tokens must be (?:less than or equal to|at most|<=) ?(\d+)",
)
_WINDOW_AND_PROMPT = (
    # vLLM >= 0.6: "... maximum context length is 4096 tokens and your request has 2104 input
    # tokens (2000 > 4096 - 2104)"
    r"maximum context length is (\d+) tokens and your request has (\d+) input tokens",
    # vLLM before: "... maximum context length is 4096 tokens. However, you requested 5000
    # tokens (3000 in the messages, 2000 in the completion)"
    r"maximum context length is (\d+) tokens\. However, you requested \d+ tokens "
    r"\((\d+) in the messages, \d+ in the completion\)",
)


def output_limit(
    purpose: str, asked: int | None, configured: Mapping[str, int] | None = None
) -> int:
    """The ``max_tokens`` of a request of kind ``purpose``: the user's setting for the kind,
    else what the caller ``asked``, else the kind's default."""
    if configured and configured.get(purpose):
        return configured[purpose]
    if asked is not None and asked > 0:
        return asked
    return OUTPUT_TOKEN_LIMITS.get(purpose, DEFAULT_OUTPUT_TOKENS)


def smaller_output_limit(message: str, asked: int) -> int | None:
    """The output bound a server refusing ``asked`` with ``message`` would take (``None``: the
    message is not about the output bound, or the room left is too small to try again)."""
    bound: int | None = None
    for pattern in _AT_MOST:
        match = re.search(pattern, message, re.IGNORECASE)
        if match:
            bound = int(match.group(1))
            break
    else:
        for pattern in _WINDOW_AND_PROMPT:
            match = re.search(pattern, message, re.IGNORECASE)
            if match:
                window, prompt = int(match.group(1)), int(match.group(2))
                bound = window - prompt
                break
    if bound is None or bound >= asked or bound < MIN_OUTPUT_TOKENS:
        return None
    return bound
