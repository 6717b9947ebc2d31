"""Token accounting of one model response (or the sum of several)."""

from __future__ import annotations

from cairn.values import Value

__all__ = ["Usage"]


class Usage(Value, frozen=False):
    """``input_tokens`` is the whole prompt; ``cached_tokens`` of it were read from the
    endpoint's prompt cache and ``cache_write_tokens`` written to it (Anthropic reports both)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.total_tokens += other.total_tokens
        self.cached_tokens += other.cached_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cache_write_tokens += other.cache_write_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
            "cache_read_input_tokens": self.cached_tokens,
            "cache_creation_input_tokens": self.cache_write_tokens,
        }
