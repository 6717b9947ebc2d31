"""Memory telemetry events. They carry counts, strategies and durations, never query text,
memory bodies or paths.

- ``memory.recall``: one per finished recall (none when the caller aborted it).
- ``memory.recall.delivery``: per Recall handle, at most one ``fast`` delivery plus exactly one
  terminal event (a ``refined`` delivery or a discard).
- ``memory.forget``: one per applied forget or restore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from cairn import telemetry

__all__ = [
    "DISCARD_REASONS",
    "FORGET_EVENT",
    "RECALL_DELIVERY_EVENT",
    "RECALL_EVENT",
    "DeliveryPoint",
    "DiscardReason",
    "RecallPhase",
    "RecallTimings",
    "emit_delivery",
    "emit_forget",
    "emit_recall",
]

RECALL_EVENT = "memory.recall"
RECALL_DELIVERY_EVENT = "memory.recall.delivery"
FORGET_EVENT = "memory.forget"

RecallPhase: TypeAlias = Literal["fast", "refined"]
DeliveryPoint: TypeAlias = Literal["initial", "tool_result", "discarded"]
DiscardReason: TypeAlias = Literal[
    "new_query",
    "abort",
    "reset",
    "shutdown",
    "no_safe_delivery_point",
    "no_relevant_results",
    "already_delivered",
]
DISCARD_REASONS: tuple[DiscardReason, ...] = (
    "new_query",
    "abort",
    "reset",
    "shutdown",
    "no_safe_delivery_point",
    "no_relevant_results",
    "already_delivered",
)


@dataclass(slots=True)
class RecallTimings:
    """Milliseconds spent in each step of one recall."""

    scan_ms: float = 0.0
    fast_ms: float = 0.0
    selector_ms: float = 0.0


def emit_recall(
    *,
    query_length: int,
    docs_scanned: int,
    docs_selected: int,
    strategy: str,
    duration_ms: float,
    timings: RecallTimings,
) -> None:
    telemetry.emit(
        RECALL_EVENT,
        query_length=query_length,
        docs_scanned=docs_scanned,
        docs_selected=docs_selected,
        strategy=strategy,
        duration_ms=round(duration_ms, 3),
        scan_duration_ms=round(timings.scan_ms, 3),
        fast_duration_ms=round(timings.fast_ms, 3),
        selector_duration_ms=round(timings.selector_ms, 3),
    )


def emit_delivery(
    *,
    phase: RecallPhase,
    delivery_point: DeliveryPoint,
    discard_reason: DiscardReason | None,
    strategy: str,
    docs_selected: int,
    latency_ms: float,
) -> None:
    telemetry.emit(
        RECALL_DELIVERY_EVENT,
        phase=phase,
        delivery_point=delivery_point,
        discard_reason=discard_reason,
        strategy=strategy,
        docs_selected=docs_selected,
        latency_ms=round(latency_ms, 3),
    )


def emit_forget(
    *, action: Literal["forget", "restore"], strategy: str, entries: int, files: int
) -> None:
    telemetry.emit(FORGET_EVENT, action=action, strategy=strategy, entries=entries, files=files)
