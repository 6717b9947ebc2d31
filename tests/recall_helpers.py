"""A test double for the memory package's Recall handle (the agent client's ``RecallHandle``):
it answers every ``consume`` with ``prompt`` and records each call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from cairn.abort import AbortSignal
from cairn.vocabulary.recall import RecallDelivery, RecallPhase


@dataclass
class RecordingRecall:
    prompt: str | None = "## Relevant memory\n- deploy with `make release`"
    fail: bool = False
    surfaced_paths: set[str] = field(default_factory=set)
    begun: list[tuple[str, list[str]]] = field(default_factory=list)
    consumed: list[str] = field(default_factory=list)
    sent: int = 0  # requests written while this handle was attached

    def begin(self, query: str, signal: AbortSignal, recent_tools: Sequence[str]) -> None:
        self.begun.append((query, list(recent_tools)))

    async def consume(self, point: Literal["initial", "tool_result"]) -> RecallDelivery | None:
        self.consumed.append(point)
        if self.fail:
            raise RuntimeError("recall broke")
        if self.prompt is None:
            return None
        phase: RecallPhase = "fast" if point == "initial" else "refined"
        return RecallDelivery(self.prompt, [], phase, "heuristic")

    def request_sent(self) -> None:
        self.sent += 1

    def finish(self) -> None:
        pass

    def cancel(self, reason: str) -> None:
        pass

    def reset(self) -> None:
        self.surfaced_paths.clear()
