"""Memory telemetry events. They carry counts, strategies and durations, never query text,
memory bodies or paths.

- ``memory.recall``: one per finished recall (none when the caller aborted it).
- ``memory.recall.delivery``: per Recall handle, at most one ``fast`` delivery plus exactly one
  terminal event (a ``refined`` delivery or a discard).
- ``memory.forget``: one per applied forget or restore.
- ``memory.extract``: one per Extract run or skip (queued requests are not runs).
- ``memory.dream``: one per Dream run or skip.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

from cairn import telemetry
from cairn.values import Value

__all__ = [
    "DISCARD_REASONS",
    "DREAM_EVENT",
    "EXTRACT_EVENT",
    "FORGET_EVENT",
    "RECALL_DELIVERY_EVENT",
    "RECALL_EVENT",
    "DeliveryPoint",
    "DiscardReason",
    "RecallPhase",
    "RecallTimings",
    "emit_delivery",
    "emit_dream",
    "emit_extract",
    "emit_forget",
    "emit_recall",
]

RECALL_EVENT = "memory.recall"
RECALL_DELIVERY_EVENT = "memory.recall.delivery"
FORGET_EVENT = "memory.forget"
EXTRACT_EVENT = "memory.extract"
DREAM_EVENT = "memory.dream"

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
DISCARD_REASONS: tuple[DiscardReason, ...] = get_args(DiscardReason)


class RecallTimings(Value, frozen=False):
    """Milliseconds spent in each step of one recall."""

    scan_ms: float = 0.0
    fast_ms: float = 0.0
    semantic_ms: float = 0.0  # waiting for the first request, loading the model, searching
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
        semantic_duration_ms=round(timings.semantic_ms, 3),
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


def emit_extract(
    *,
    trigger: Literal["auto", "manual"],
    status: Literal["completed", "skipped", "failed", "cancelled"],
    skipped_reason: str | None,
    touched_topics: list[str],
    duration_ms: float,
    agent_status: str | None = None,
    files: int = 0,
) -> None:
    """``patches_count`` is the number of touched topics (memory types), as in the reference."""
    telemetry.emit(
        EXTRACT_EVENT,
        trigger=trigger,
        status=status,
        skipped_reason=skipped_reason,
        patches_count=len(touched_topics),
        touched_topics=",".join(touched_topics),
        duration_ms=round(duration_ms, 3),
        agent_status=agent_status,
        files=files,
    )


def emit_dream(
    *,
    trigger: Literal["auto", "manual"],
    status: str,
    skipped_reason: str | None,
    touched_topics: list[str],
    duration_ms: float,
    created: int = 0,
    updated: int = 0,
    deleted: int = 0,
    deduped: int = 0,
    split: int = 0,
) -> None:
    """``status``: updated, noop, skipped, failed or cancelled."""
    telemetry.emit(
        DREAM_EVENT,
        trigger=trigger,
        status=status,
        skipped_reason=skipped_reason,
        touched_topics=",".join(touched_topics),
        duration_ms=round(duration_ms, 3),
        created_entries=created,
        updated_entries=updated,
        deleted_entries=deleted,
        deduped_entries=deduped,
        split_entries=split,
    )
