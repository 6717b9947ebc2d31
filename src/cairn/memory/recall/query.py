"""Recall for one query: the deterministic fast result, then the model selector's choice.

1. Refresh the store (incremental) and drop the paths already surfaced in this session.
2. Rank the pool lexically, leaving out recent-tool noise. The top two are the *fast result*,
   ranked on their own and published through ``on_fast_result`` before anything else is done.
3. Rank the ≤180 lexical candidates (the top two lead them), find the ≤180 memories nearest in
   meaning to the query (semantic candidates, :mod:`cairn.memory.recall.semantic`; skipped when
   off or when the embedding model cannot load) and offer ≤200 candidates (lexical and semantic
   matches in turn, interleaved with the newest documents) to the selector on the fast model.
   Its answer wins, even when empty; if it fails, the lexical top five are used; if the caller
   aborts, the result is empty and nothing is recorded.

The fast phase never awaits, so it runs in the first step of the recall task and is published
before a caller's bounded wait can expire, however busy the machine is. Once a fast result is
published, recall waits for ``after_fast`` (the lifecycle: until the turn's first request has
been written) before it ranks and builds the selector's candidates, so that work (~180 documents
ranked, up to 200 built) never runs between the fast result and the request leaving; without
``after_fast`` it yields once.
The semantic candidates wait for ``before_semantic`` (the lifecycle: until the turn's first
request has taken its memory), so loading the model never competes with a session's start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import field
from pathlib import Path
from typing import Literal, TypeAlias

from cairn.abort import Aborted, AbortSignal
from cairn.debug_log import get_logger
from cairn.llm.types import Provider
from cairn.memory.document import MemoryDoc
from cairn.memory.recall.candidates import (
    LEXICAL_CANDIDATE_LIMIT,
    MAX_MODEL_CANDIDATE_DOCS,
    MAX_RELEVANT_DOCS,
    SEMANTIC_CANDIDATE_LIMIT,
    build_candidates,
)
from cairn.memory.recall.noise import is_noise, tool_aliases
from cairn.memory.recall.render import render_relevant_memory
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.telemetry import RecallTimings, emit_recall
from cairn.values import Value

__all__ = [
    "MAX_FAST_RECALL_DOCS",
    "RecallResult",
    "RecallStrategy",
    "recall_memories",
]

MAX_FAST_RECALL_DOCS = 2  # documents in the deterministic fast result

RecallStrategy: TypeAlias = Literal["none", "heuristic", "model"]
_log = get_logger("MEMORY_RECALL")


class RecallResult(Value):
    """What Recall found: the rendered prompt, the documents and how they were chosen."""

    prompt: str = ""
    docs: list[MemoryDoc] = field(default_factory=list)
    strategy: RecallStrategy = "none"

    @property
    def paths(self) -> list[str]:
        return [str(doc.path) for doc in self.docs]


class _Clock(Value, frozen=False):
    started: float = field(default_factory=time.perf_counter)
    mark: float = field(default_factory=time.perf_counter)

    def lap_ms(self) -> float:
        now = time.perf_counter()
        lap, self.mark = (now - self.mark) * 1000, now
        return lap

    def total_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000


async def recall_memories(
    store: MemoryStore,
    query: str,
    *,
    provider: Provider | None,
    excluded: AbstractSet[str],
    recent_tools: Sequence[str],
    abort: AbortSignal,
    now: Callable[[], float],
    on_fast_result: Callable[[RecallResult], None] | None = None,
    session_id: str | None = None,
    limit: int = MAX_RELEVANT_DOCS,
    marks: Callable[[Sequence[MemoryDoc]], list[MemoryDoc]] | None = None,
    semantic: bool = False,
    before_semantic: Callable[[], Awaitable[object]] | None = None,
    after_fast: Callable[[], Awaitable[object]] | None = None,
) -> RecallResult:
    """Recall memories for ``query`` (see the module docstring). Raises only on a bug.

    ``marks`` returns documents with their staleness set (the evidence check): applied to what
    is delivered and to the selector's candidates, so a possibly stale memory is never
    delivered, nor offered to the selector, as plain fact.
    """
    mark = marks or list
    clock, timings = _Clock(), RecallTimings()
    scanned = store.refresh().docs - sum(1 for path in excluded if store.get(Path(path)))
    timings.scan_ms = clock.lap_ms()

    def finish(result: RecallResult) -> RecallResult:
        emit_recall(
            query_length=len(query),
            docs_scanned=scanned,
            docs_selected=len(result.docs),
            strategy=result.strategy,
            duration_ms=clock.total_ms(),
            timings=timings,
        )
        return result

    if abort.aborted:
        return RecallResult()
    if not query.strip() or scanned <= 0 or limit <= 0:
        return finish(RecallResult())

    aliases = tool_aliases(recent_tools)

    def ineligible(doc: MemoryDoc) -> bool:
        return str(doc.path) in excluded or is_noise(doc, aliases)

    def ranked(count: int) -> list[MemoryDoc]:
        return [hit.doc for hit in store.rank(query, limit=count, exclude=ineligible)]

    # The selector needs ≤180 lexical candidates, the fallback ``limit``; nobody else needs more.
    wanted = max(LEXICAL_CANDIDATE_LIMIT, limit) if provider is not None else limit
    if on_fast_result is None:
        lexical = ranked(wanted)
        timings.fast_ms = clock.lap_ms()
    else:
        # Only the top two stand between the turn and its first request: rank them alone.
        fast_docs = mark(ranked(MAX_FAST_RECALL_DOCS))
        if fast_docs:
            fast_prompt = render_relevant_memory(fast_docs, now=now())
            _publish(on_fast_result, RecallResult(fast_prompt, fast_docs, "heuristic"))
        timings.fast_ms = clock.lap_ms()
        if fast_docs and after_fast is not None:
            await after_fast()  # the refinement waits for the turn's request to be written
            clock.lap_ms()  # the wait is no step's work
            if abort.aborted:
                return RecallResult()
        else:
            await asyncio.sleep(0)  # a waiting consumer takes the fast result before the rest
        # Fewer hits than asked for: the pool holds no other lexical match.
        lexical = ranked(wanted) if len(fast_docs) == MAX_FAST_RECALL_DOCS else fast_docs

    fallback = lexical[:limit]
    if provider is None:
        return finish(_heuristic(mark(fallback), now))
    # The refinement's modules: imported here, after the first request (issue #32).
    from cairn.memory.recall.selector import SelectorError, select_memories
    from cairn.memory.recall.semantic import semantic_candidates

    similar: Iterable[MemoryDoc] = ()
    if semantic:
        if before_semantic is not None:
            await before_semantic()
        if abort.aborted:
            return RecallResult()
        similar = await semantic_candidates(
            store, query, limit=SEMANTIC_CANDIDATE_LIMIT, exclude=ineligible
        )
        timings.semantic_ms = clock.lap_ms()
    # The semantic candidates are chosen as build_candidates reads them (~130 of 180); the
    # newest that are among them are dropped there, with every other candidate shown.
    taken = {doc.path for doc in lexical[:LEXICAL_CANDIDATE_LIMIT]}
    recent = store.recent(
        limit=MAX_MODEL_CANDIDATE_DOCS,
        exclude=lambda doc: doc.path in taken or ineligible(doc),
    )
    candidates = build_candidates(lexical, recent, limit=limit, semantic=similar)
    offered = candidates.model
    if marks is not None:  # up to 200 evidence checks: off the event loop
        offered = await asyncio.to_thread(marks, offered)
        checked = {doc.path: doc for doc in offered}
        fallback = [checked.get(doc.path) or doc for doc in fallback]
        if abort.aborted:
            return RecallResult()
    try:
        chosen = await select_memories(
            provider,
            query,
            offered,
            recent_tools=recent_tools,
            abort=abort,
            limit=limit,
            session_id=session_id,
        )
    except Aborted:
        return RecallResult()
    except SelectorError as exc:
        timings.selector_ms = clock.lap_ms()
        if abort.aborted:
            return RecallResult()
        _log.warning(f"recall selector failed, using the lexical result: {exc}")
        return finish(_heuristic(fallback, now))
    timings.selector_ms = clock.lap_ms()
    if abort.aborted:
        return RecallResult()
    strategy: RecallStrategy = "model" if chosen else "none"
    return finish(RecallResult(render_relevant_memory(chosen, now=now()), chosen, strategy))


def _heuristic(docs: list[MemoryDoc], now: Callable[[], float]) -> RecallResult:
    if not docs:
        return RecallResult()
    return RecallResult(render_relevant_memory(docs, now=now()), docs, "heuristic")


def _publish(callback: Callable[[RecallResult], None], result: RecallResult) -> None:
    try:
        callback(result)
    except Exception as exc:  # a listener's bug must not lose the recall
        _log.warning(f"fast recall listener failed: {exc!r}")
