"""Semantic candidates (issue #26): the diverse choice among the nearest memories, and a
backlog of missing vectors that is embedded in the background instead of in a Recall."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import numpy as np
import pytest

from cairn.memory.paths import MemoryRoots
from cairn.memory.recall import semantic
from cairn.memory.recall.semantic import diverse_order, iter_diverse_order, semantic_candidates
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.parse import render_memory_file
from tests.polling import eventually_async

GO_TOOLS = ("Pulumi", "Sentry", "Jest", "Vitest", "Cypress", "Playwright", "Selenium", "Locust")


def _unit(*rows: list[float]) -> np.ndarray:
    matrix = np.array(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_near_copies_do_not_take_every_seat_from_a_distinct_match() -> None:
    query = _unit([1, 0, 0])[0]
    vectors = _unit(
        [0.9, 0.42, 0.02],  # three near-copies, each nearer the query ...
        [0.9, 0.43, 0.01],
        [0.9, 0.44, 0],
        [0.8, 0, 0.6],  # ... than this memory, which says something else
        [0, 0, 1],  # unrelated
    )
    assert diverse_order(query, vectors, limit=2) == [0, 3]
    assert sorted(diverse_order(query, vectors, limit=5)) == [0, 1, 2, 3, 4]
    assert diverse_order(query, vectors[:0], limit=3) == []


def test_with_all_weight_on_relevance_the_order_is_by_similarity() -> None:
    query = _unit([1, 0])[0]
    vectors = _unit([0.5, 0.5], [1, 0.1], [1, 0.01])
    assert diverse_order(query, vectors, limit=3, weight=1.0) == [2, 1, 0]


def _mmr_steps(
    query: np.ndarray, vectors: np.ndarray, chosen: list[int], weight: float
) -> list[tuple[float, float]]:
    """Maximal marginal relevance spelled out in float64: at each step, (the score of the row
    chosen, the best score of any row not chosen yet)."""
    rows = vectors.astype(np.float64)
    relevance = weight * (rows @ query.astype(np.float64))
    closest = np.full(len(rows), -1.0)
    taken = np.zeros(len(rows), dtype=bool)
    steps = []
    for row in chosen:
        score = relevance + (weight - 1.0) * closest
        steps.append((float(score[row]), float(score[~taken].max())))
        taken[row] = True
        closest = np.maximum(closest, rows @ rows[row])
    return steps


@pytest.mark.parametrize("seed", range(6))
def test_the_diverse_choice_is_maximal_marginal_relevance(seed: int) -> None:
    """Issue #26: diverse_order keeps only a running score (a minimum per step) and computes the
    similarities of the rows it will likely choose next together, in one matrix product; each
    row it chooses is still the best by the formula (to float32 rounding: near-copies make
    near-ties), no row twice, and of exact duplicates (equal scores) the earlier row first."""
    chance = np.random.default_rng(seed)
    families = chance.normal(size=(40, 24)).astype(np.float32)
    rows = families[chance.integers(0, 40, size=300)] + 0.05 * chance.normal(size=(300, 24))
    rows[10] = rows[11] = rows[12]  # exact duplicates: equal scores, the earlier row first
    vectors = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    query = vectors[5] + 0.3 * vectors[100]
    query = (query / np.linalg.norm(query)).astype(np.float32)
    for weight in (0.0, 0.5, 0.7, 1.0):
        for limit in (1, 37, 180, 400):
            chosen = diverse_order(query, vectors, limit=limit, weight=weight)
            assert len(chosen) == min(limit, 300) and len(set(chosen)) == len(chosen)
            for score, best in _mmr_steps(query, vectors, chosen, weight):
                assert score >= best - 1e-6
            duplicates = [row for row in chosen if row in (10, 11, 12)]
            assert duplicates == sorted(duplicates)


def test_the_lazy_choice_reads_as_far_as_asked_and_agrees_with_the_whole_one() -> None:
    """Issue #26: the candidate list reads ~130 of the 180 semantic candidates; the ones it
    reads are those the whole choice starts with, whatever the limit."""
    chance = np.random.default_rng(7)
    rows = chance.normal(size=(500, 16)).astype(np.float32)
    vectors = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    query = vectors[3]
    whole = diverse_order(query, vectors, limit=180)
    for read in (0, 1, 17, 130, 180):
        lazy = iter_diverse_order(query, vectors, limit=180)
        assert list(itertools.islice(lazy, read)) == whole[:read]
        assert diverse_order(query, vectors, limit=read) == whole[:read]
    assert sorted(iter_diverse_order(query, vectors[:2], limit=180)) == [0, 1]  # then it ends


def test_a_relevance_weight_outside_0_to_1_is_refused() -> None:
    query = _unit([1, 0])[0]
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        diverse_order(query, _unit([1, 0]), limit=1, weight=1.5)


def _roots(tmp_path: Path) -> MemoryRoots:
    return MemoryRoots(
        project=tmp_path / "p" / "memory", user=tmp_path / "u", state_dir=tmp_path / "p"
    )


def _write(roots: MemoryRoots, relative: str, name: str, description: str, body: str) -> None:
    assert roots.project is not None
    path = roots.project / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(name, description, "project", body), "utf-8")


def _go_memories(roots: MemoryRoots, copies: int) -> None:
    for number in range(copies):
        tool = GO_TOOLS[number % len(GO_TOOLS)]
        description = f"Go checks are written for {tool} and run in parallel"
        _write(roots, f"project/go-{number}.md", f"Go tests with {tool}", description, "Fast.")
    description = "Prefers tabs over spaces in Go files"
    body = "Keep gofmt output as it is; never convert leading tabs."
    _write(roots, "feedback/tabs.md", "Tabs in Go files", description, body)


async def test_a_paraphrase_is_found_among_near_copies_of_other_memories(
    tmp_path: Path,
) -> None:
    roots = _roots(tmp_path)
    _go_memories(roots, copies=semantic.INLINE_EMBED_LIMIT - 1)
    store = MemoryStore(roots, watch=False)
    store.refresh()

    found = await semantic_candidates(store, "how should I indent this golang source?", limit=3)

    names = [doc.title for doc in found]
    assert names[0] == "Tabs in Go files"
    assert len(names) == 3 and len(set(names)) == 3
    store.close()


async def test_a_large_backlog_is_embedded_in_the_background_not_in_the_recall(
    tmp_path: Path,
) -> None:
    """The first Recall over a memory with no vectors yet (a large memory, a model upgrade)
    does not embed it all before answering: it answers with what it has and a background task
    embeds the rest, after which the paraphrase is found."""
    roots = _roots(tmp_path)
    _go_memories(roots, copies=semantic.INLINE_EMBED_LIMIT + 40)
    store = MemoryStore(roots, watch=False)
    store.refresh()
    query = "how should I indent this golang source?"

    await semantic_candidates(store, query, limit=3)

    assert store.vector_jobs(), "the Recall embedded the whole backlog before answering"
    deadline = time.monotonic() + 120
    while store.vector_jobs():
        assert time.monotonic() < deadline, "the background catch-up did not finish"
        await asyncio.sleep(0.05)
    later = list(await semantic_candidates(store, query, limit=3))
    assert later[0].title == "Tabs in Go files"
    saved = roots.state_dir / "recall-index" / "project.vec"
    # saved by the task after its last chunk: a Recall on the int8 engine can come first
    assert await eventually_async(saved.is_file)
    store.close()
