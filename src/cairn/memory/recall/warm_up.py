"""Recall while this machine's index warms up: the backend's own search serves the fast phase.

A fresh machine with memory in PostgreSQL (an empty mirror) pulls the namespace and builds its
local index in the background; until that is over the store cannot be used, and the turn does
not wait for it. Recall then asks the database (:class:`~cairn.memory.store.backend.WarmUpSearch`,
a full-text query in a thread, bounded): its best matches, minus the memories already surfaced,
recent-tool noise and with their evidence checked from their text, are published as the fast
result, and are the whole result (no selector: its candidates come from the local index).
A search that fails or takes too long gives an empty result; the turn never waits for it longer
than Recall's first delivery point waits (100 ms), and a later one takes it at a tool result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc
from cairn.memory.recall.noise import is_noise, tool_aliases
from cairn.memory.recall.query import MAX_FAST_RECALL_DOCS, RecallResult
from cairn.memory.recall.render import render_relevant_memory

if TYPE_CHECKING:
    from cairn.memory.store.backend import WarmUpSearch
    from cairn.memory.trust.staleness import EvidenceCheck

__all__ = ["SEARCH_TIMEOUT_S", "recall_while_warming"]

SEARCH_TIMEOUT_S = 5.0  # the longest Recall waits for the database's answer (the turn: 100 ms)
SEARCH_CANDIDATES = 8  # matches asked for per namespace (some may be surfaced or noise)
_log = get_logger("MEMORY_RECALL")


async def recall_while_warming(
    search: WarmUpSearch,
    query: str,
    excluded: AbstractSet[str],
    recent_tools: Sequence[str],
    check: EvidenceCheck,
    now: Callable[[], float],
    on_fast_result: Callable[[RecallResult], None] | None = None,
) -> RecallResult:
    """The fast result from ``search`` (see the module docstring), minus the ``excluded``
    paths and the noise of ``recent_tools``, checked by ``check``, aged by ``now``, published
    through ``on_fast_result``; never raises."""
    if not query.strip():
        return RecallResult()
    aliases = tool_aliases(recent_tools)

    def find() -> list[MemoryDoc]:
        found = search.search(query, SEARCH_CANDIDATES)
        kept = [
            (doc, text)
            for doc, text in found
            if str(doc.path) not in excluded and not is_noise(doc, aliases)
        ]
        best = kept[:MAX_FAST_RECALL_DOCS]
        return check.mark_texts(best)

    try:
        async with asyncio.timeout(SEARCH_TIMEOUT_S):
            docs = await asyncio.to_thread(find)
    except Exception as error:  # best effort: no memory this time
        _log.warning(f"recall from the database failed: {error!r}")
        return RecallResult()
    if not docs:
        return RecallResult()
    result = RecallResult(render_relevant_memory(docs, now=now()), docs, "heuristic")
    if on_fast_result is not None:
        try:
            on_fast_result(result)
        except Exception as error:  # a listener's bug must not lose the recall
            _log.warning(f"fast recall listener failed: {error!r}")
    return result
