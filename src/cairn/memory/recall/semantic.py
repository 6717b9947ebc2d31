"""Semantic candidates: the memories nearest in meaning to a query (issue #26).

The query is embedded with the local model (:mod:`cairn.memory.store.embedding`) and compared
with every memory's stored vector (:mod:`cairn.memory.store.vectors`). From the
:data:`DIVERSITY_POOL` nearest, the candidates are chosen by maximal marginal relevance: each
next one is the memory with the best ``0.7 × similarity to the query − 0.3 × similarity to the
closest one already chosen``, so the selector's scarce seats are not spent on near-copies of one
memory ("the billing service runs on ECS" ×30) while a memory that answers the query in other
words waits behind them. Measured on the paraphrase set (benchmarks/README.md): at 10,000
memories it raises candidate-list recall from 59 % to 89 %.

Vectors are computed when memories are written (:func:`update_vectors`, in the background).
What is still missing when a query comes (a memory edited by hand) is embedded first, in a
worker thread, up to :data:`INLINE_EMBED_LIMIT` memories; a larger backlog (the first use of a
large memory, a model upgrade) is embedded by one background task per store, in chunks, while
Recall uses the vectors it has.

Best effort, like all of Recall: when the model cannot load (one warning per process) or anything
else goes wrong, there are no semantic candidates and the selector sees lexical and recent ones.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc
from cairn.memory.store.memory_store import MemoryStore, VectorJob, VectorSync

if TYPE_CHECKING:
    from cairn.memory.store.embedding import EmbeddingModel

__all__ = [
    "DIVERSITY_POOL",
    "INLINE_EMBED_LIMIT",
    "RELEVANCE_WEIGHT",
    "compute_vectors",
    "diverse_order",
    "iter_diverse_order",
    "nearest_diverse",
    "semantic_candidates",
    "update_vectors",
]

DIVERSITY_POOL = 1_000  # nearest memories the diverse selection chooses from
RELEVANCE_WEIGHT = 0.7  # weight of query similarity against similarity to those chosen
INLINE_EMBED_LIMIT = 64  # missing vectors a Recall computes before it searches (~0.5 s) ...
EMBED_CHUNK = 64  # ... a larger backlog goes to the background, this many per worker call
_GUESSES = 16  # rows whose diversity terms are computed together (see diverse_order)

_log = get_logger("MEMORY_RECALL")
_catching_up: weakref.WeakKeyDictionary[MemoryStore, asyncio.Task[int]] = (
    weakref.WeakKeyDictionary()
)  # the store's background catch-up, while it runs


def _prepare(store: MemoryStore) -> object | None:
    """The model and the saved vectors, loaded (file reads: runs in a worker thread)."""
    from cairn.memory.store.embedding import load_model

    model = load_model()
    if model is not None:
        store.load_vectors(model)
    return model


def compute_vectors(store: MemoryStore) -> int:
    """:func:`update_vectors` for a caller with no event loop (``cairn memory reindex``)."""
    model = _prepare(store)
    if model is None:
        return 0
    from cairn.memory.store.embedding import EmbeddingModel

    assert isinstance(model, EmbeddingModel)
    jobs = store.vector_jobs()
    sync = store.vector_sync
    if jobs and sync is not None:
        jobs = _take_shared(store, sync, model, jobs)
    if jobs:
        vectors = model.embed([job.text for job in jobs])
        store.apply_vectors(jobs, vectors)
        if sync is not None:
            _share(sync, model, jobs, vectors)
    store.save_vectors()
    return len(jobs)


async def update_vectors(store: MemoryStore, *, save: bool = True) -> int:
    """Embed the memories whose vectors are missing or stale; returns how many. The store is
    read and changed on the calling thread, the embedding runs in a worker thread."""
    model = await asyncio.to_thread(_prepare, store)
    if model is None:
        return 0
    running = _catching_up.get(store)
    if running is not None and not running.done():
        return await asyncio.shield(running)
    return await _catch_up(store, model, save=save)


async def _catch_up(
    store: MemoryStore, model: object, *, save: bool, jobs: list[VectorJob] | None = None
) -> int:
    """Embed ``jobs`` (by default every missing vector), :data:`EMBED_CHUNK` per worker call;
    returns how many were embedded."""
    from cairn.memory.store.embedding import EmbeddingModel

    assert isinstance(model, EmbeddingModel)
    if jobs is None:
        jobs = store.vector_jobs()
    sync = store.vector_sync
    if jobs and sync is not None:
        jobs = await asyncio.to_thread(_take_shared, store, sync, model, jobs)
    for start in range(0, len(jobs), EMBED_CHUNK):
        chunk = jobs[start : start + EMBED_CHUNK]
        vectors = await asyncio.to_thread(model.embed, [job.text for job in chunk])
        store.apply_vectors(chunk, vectors)
        if sync is not None:
            await asyncio.to_thread(_share, sync, model, chunk, vectors)
    if save:
        await asyncio.to_thread(store.save_vectors)
    return len(jobs)


def _catch_up_in_background(store: MemoryStore, model: object) -> None:
    """Start the store's background catch-up unless it runs already."""
    running = _catching_up.get(store)
    if running is not None and not running.done():
        return
    task = asyncio.get_running_loop().create_task(
        _catch_up(store, model, save=True), name="cairn-memory-vectors-backlog"
    )
    _catching_up[store] = task
    task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.warning(f"recall vectors not computed: {task.exception()!r}")


def _take_shared(
    store: MemoryStore, sync: VectorSync, model: EmbeddingModel, jobs: list[VectorJob]
) -> list[VectorJob]:
    """Apply the vectors another process already stored for these texts; return the rest."""
    remaining: list[VectorJob] = []
    for scope in sorted({job.scope for job in jobs}):
        mine = [job for job in jobs if job.scope == scope]
        try:
            rows = sync.fetch(scope, model.model_id, model.dim,
                              {job.relative: job.digest for job in mine})  # fmt: skip
        except Exception as error:  # the database is down: compute them here
            _log.warning(f"shared recall vectors not read: {error!r}")
            rows = []
        found = {path: vector for path, _digest, vector in rows}
        taken = [job for job in mine if job.relative in found]
        if taken:
            import numpy as np

            store.apply_vectors(taken, np.stack([found[job.relative] for job in taken]))
        remaining += [job for job in mine if job.relative not in found]
    return remaining


def _share(sync: VectorSync, model: EmbeddingModel, jobs: list[VectorJob], vectors: Any) -> None:
    for scope in sorted({job.scope for job in jobs}):
        pairs = zip(jobs, vectors, strict=True)
        rows = [(job.relative, job.digest, vector) for job, vector in pairs if job.scope == scope]
        try:
            sync.store(scope, model.model_id, rows)
        except Exception as error:  # best effort: this machine keeps its own copy
            _log.warning(f"shared recall vectors not stored: {error!r}")


async def semantic_candidates(
    store: MemoryStore,
    query: str,
    *,
    limit: int,
    exclude: Callable[[MemoryDoc], bool] | None = None,
) -> Iterator[MemoryDoc]:
    """Up to ``limit`` eligible memories near in meaning to ``query`` and unlike each other (see
    the module docstring), chosen one by one as they are read (the candidate list reads ~130 of
    180: the rest is never computed); empty when the model is unavailable. Neither this nor the
    iterator raises but for cancellation."""
    try:
        model = await asyncio.to_thread(_prepare, store)
        if model is None:
            return iter(())
        running = _catching_up.get(store)
        if running is None or running.done():
            jobs = store.vector_jobs()
            if len(jobs) > INLINE_EMBED_LIMIT:
                _catch_up_in_background(store, model)
            elif jobs:
                await _catch_up(store, model, save=False, jobs=jobs)
        vector = await asyncio.to_thread(model.embed_query, query)  # type: ignore[attr-defined]
        return _guarded(nearest_diverse(store, vector, limit=limit, exclude=exclude))
    except asyncio.CancelledError:
        raise
    except Exception as error:  # best effort: lexical and recent candidates still go out
        _log.warning(f"semantic recall candidates failed: {error!r}")
        return iter(())


def _guarded(docs: Iterator[MemoryDoc]) -> Iterator[MemoryDoc]:
    """``docs``, ending early (with a warning) instead of raising."""
    try:
        yield from docs
    except Exception as error:
        _log.warning(f"semantic recall candidates failed: {error!r}")


def nearest_diverse(
    store: MemoryStore,
    vector: Any,
    *,
    limit: int,
    exclude: Callable[[MemoryDoc], bool] | None = None,
) -> Iterator[MemoryDoc]:
    """Up to ``limit`` of the :data:`DIVERSITY_POOL` memories nearest to ``vector`` (a query's
    embedding), in :func:`iter_diverse_order`'s order, each chosen when it is read (the pool is
    found at once)."""
    pool, vectors = store.nearest(vector, limit=max(limit, DIVERSITY_POOL), exclude=exclude)
    return (pool[index] for index in iter_diverse_order(vector, vectors, limit=limit))


def diverse_order(
    query: Any, vectors: Any, *, limit: int, weight: float = RELEVANCE_WEIGHT
) -> list[int]:
    """:func:`iter_diverse_order`, all at once."""
    return list(iter_diverse_order(query, vectors, limit=limit, weight=weight))


def iter_diverse_order(
    query: Any, vectors: Any, *, limit: int, weight: float = RELEVANCE_WEIGHT
) -> Iterator[int]:
    """Maximal marginal relevance: indexes of up to ``limit`` rows of ``vectors`` (unit length),
    each next one maximising ``weight × cos(row, query) − (1 − weight) × max cos(row, chosen)``.
    The first is the nearest; ties go to the earlier row. Lazy: each row is chosen when it is
    read (a reader that stops early saves the rest)."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the relevance weight must be within 0..1, not {weight}")
    count = min(limit, len(vectors))
    if count <= 0:
        return iter(())
    return itertools.islice(_mmr(query, vectors, weight), count)


def _mmr(query: Any, vectors: Any, weight: float) -> Iterator[int]:
    import numpy as np

    relevance = weight * (vectors @ query).astype(np.float32)
    penalty = np.float32(weight - 1.0)
    # score = relevance + penalty × (max cos to the chosen so far, -1 before any): it only
    # falls, so each step takes the minimum with the new row's term (the same float values as
    # computing the maximum first: both steps are monotonic); a chosen row is set to -inf.
    score = np.full(len(vectors), -1.0, dtype=np.float32) * penalty + relevance
    # A chosen row's term needs its similarity to every row: one matrix-vector product each
    # would read the whole pool 180 times. Instead, when the row chosen has no term yet, the
    # terms of the _GUESSES best-scored rows are computed together (one matrix product, about
    # four times cheaper a row): the next choices are mostly among them (~1.5 rows computed
    # per row chosen on the paraphrase set). Which rows are guessed changes the cost, not the
    # choice (but for float32 rounding in near-ties).
    terms: dict[int, Any] = {}
    for _ in range(len(vectors)):
        best = int(np.argmax(score))
        yield best  # the last one's term is never computed: the reader stops first
        term = terms.pop(best, None)
        if term is None:
            open_rows = np.flatnonzero(score > -np.inf)
            if len(open_rows) > _GUESSES:
                open_rows = open_rows[np.argpartition(score[open_rows], -_GUESSES)[-_GUESSES:]]
            block = vectors @ vectors[open_rows].T  # (rows, guesses)
            block *= penalty
            block += relevance[:, None]
            terms.update(zip(open_rows.tolist(), block.T, strict=True))
            term = terms.pop(best)
        np.minimum(score, term, out=score)
        score[best] = -np.inf  # each row is chosen once
