"""Semantic candidates: the memories nearest in meaning to a query (issue #26).

The query is embedded with the local model (:mod:`cairn.memory.store.embedding`) and compared
with every memory's stored vector (:mod:`cairn.memory.store.vectors`). Vectors are computed when
memories are written (:func:`update_vectors`, in the background); whatever is still missing here
(a memory edited by hand, the first use of a large memory) is embedded first, in a worker thread.

Best effort, like all of Recall: when the model cannot load (one warning per process) or anything
else goes wrong, there are no semantic candidates and the selector sees lexical and recent ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc
from cairn.memory.store.memory_store import MemoryStore, VectorJob, VectorSync

if TYPE_CHECKING:
    from cairn.memory.store.embedding import EmbeddingModel

__all__ = ["compute_vectors", "semantic_candidates", "update_vectors"]

_log = get_logger("MEMORY_RECALL")


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
    return await _catch_up(store, model, save=save)


async def _catch_up(store: MemoryStore, model: object, *, save: bool) -> int:
    from cairn.memory.store.embedding import EmbeddingModel

    assert isinstance(model, EmbeddingModel)
    jobs = store.vector_jobs()
    sync = store.vector_sync
    if jobs and sync is not None:
        jobs = await asyncio.to_thread(_take_shared, store, sync, model, jobs)
    if jobs:
        vectors = await asyncio.to_thread(model.embed, [job.text for job in jobs])
        store.apply_vectors(jobs, vectors)
        if sync is not None:
            await asyncio.to_thread(_share, sync, model, jobs, vectors)
    if save:
        await asyncio.to_thread(store.save_vectors)
    return len(jobs)


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
) -> list[MemoryDoc]:
    """The ``limit`` eligible memories nearest in meaning to ``query``; ``[]`` when the model is
    unavailable. Never raises but for cancellation."""
    try:
        model = await asyncio.to_thread(_prepare, store)
        if model is None:
            return []
        await _catch_up(store, model, save=False)
        vector = await asyncio.to_thread(model.embed, [query])  # type: ignore[attr-defined]
        return store.similar(vector[0], limit=limit, exclude=exclude)
    except asyncio.CancelledError:
        raise
    except Exception as error:  # best effort: lexical and recent candidates still go out
        _log.warning(f"semantic recall candidates failed: {error!r}")
        return []
