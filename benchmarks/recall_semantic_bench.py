"""Recall for what the user means (issue #26): candidate-list recall, hit rates and latencies.

Usage (from the repository root)::

    .venv/bin/python benchmarks/recall_semantic_bench.py                 # 1,000 and 10,000
    .venv/bin/python benchmarks/recall_semantic_bench.py --sizes 1000 --variants
    .venv/bin/python benchmarks/recall_semantic_bench.py --sizes 1000,10000 --models

The paraphrase set (``data/recall_paraphrase/pairs.yaml``, 123 pairs, and its held-out part
``heldout.yaml``, 60 pairs written before anything was tuned: memory/query pairs sharing no
content word after stemming, checked here) is mixed into generated distractors
(``recall_distractors.py``) to make a memory of N files (80 % project, 20 % user, mtimes spread
over 400 days, targets among them at random); each set gets its own memory. For every pair it
asks what the selector would be shown, built by cairn's own code (lexical top 180, semantic top
180, the newest, :func:`build_candidates` with its two semantic seats per lexical one, then the
manifest's byte budget) and prints:

- candidate-list recall: the share of queries whose memory is in the selector's manifest, for
  the rule before issue #26 (lexical 180 + newest, the old manifest line with absolute paths and
  ISO times, cut at 25,000 bytes), lexical + newest in the new manifest, with the 180 nearest
  memories as semantic candidates, and with the diverse choice among the 1,000 nearest (what
  cairn does);
- fast-phase hit@2 / hit@5 on the paraphrase set at that size, and on the existing evaluation set
  (``data/recall_eval``, 111 memories, 99 cases);
- latencies: the fast phase (rank top 2), candidate generation (lexical 180 + query embedding +
  semantic 180 + newest + manifest), loading the model, embedding every memory (the background
  cost of a memory that has no vectors yet), loading the saved vectors, and the write path of
  one memory with and without its vector.

``--variants`` also compares what a memory's vector is made from (semantic top-180 recall).
``--models`` compares the embedding models that ship in installable packages (those not
installed are skipped; ``benchmarks/recall_models.py`` says what each needs).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import recall_bench  # noqa: E402 - the existing evaluation set's loaders
from recall_distractors import distractors  # noqa: E402

PAIRS = HERE / "data" / "recall_paraphrase" / "pairs.yaml"
HELD_OUT = HERE / "data" / "recall_paraphrase" / "heldout.yaml"
NOW = recall_bench.NOW
DAY = 86_400.0
OLD_PREFIX = "/home/developer/.cairn/projects/-home-developer-src-shop/memory"  # 60 characters


def load_pairs(path: Path = PAIRS) -> list[dict[str, str]]:
    """The pairs of ``path``; exits if a memory shares a content word with its query."""
    import yaml

    from cairn.memory.store.tokenizer import tokenize

    pairs = list(yaml.safe_load(path.read_text("utf-8")))
    for pair in pairs:
        memory = {*tokenize(f"{pair['name']} {pair['description']} {pair['body']}")}
        shared = memory & {*tokenize(pair["query"])}
        if shared:
            sys.exit(f"{path.name}: {pair['query']!r} shares {sorted(shared)} with its memory")
    return pairs


class DigestCache:
    """Vectors by text digest, handed to the store as a database backend would share them
    (:class:`cairn.memory.store.memory_store.VectorSync`): the held-out memory reuses what the
    tuning set's memory computed for the same distractors. Timed runs do not use it."""

    def __init__(self) -> None:
        self.vectors: dict[tuple[str, bytes], Any] = {}
        self.reading = True  # False: only collect (a timed run computes everything)

    def fetch(self, scope: str, model: str, dim: int, wanted: dict[str, bytes]) -> list[Any]:
        if not self.reading:
            return []
        known = self.vectors
        rows = [(path, digest, known.get((model, digest))) for path, digest in wanted.items()]
        return [row for row in rows if row[2] is not None]

    def store(self, scope: str, model: str, rows: Sequence[tuple[str, bytes, Any]]) -> None:
        for _path, digest, vector in rows:
            self.vectors[(model, digest)] = vector

    def close(self) -> None:
        pass


def build_tree(base: Path, size: int, pairs: Sequence[dict[str, str]]) -> tuple[Any, list[str]]:
    """Targets and distractors as memory files; returns (roots, each pair's target key)."""
    from cairn.memory.paths import MemoryRoots
    from cairn.memory.store.parse import render_memory_file

    roots = MemoryRoots(project=base / "p" / "memory", user=base / "u", state_dir=base / "p")
    rng = random.Random(size)
    keys: list[str] = []
    files: list[tuple[str, str, str, str, str, str]] = []
    for number, pair in enumerate(pairs):
        relative = f"{pair['type']}/target-{number:03d}.md"
        keys.append(f"{pair['scope']}:{relative}")
        files.append((pair["scope"], relative, pair["name"], pair["description"], pair["type"],
                      pair["body"]))  # fmt: skip
    for relative, doc in distractors(max(size - len(pairs), 0)):
        files.append((doc.scope, relative, doc.name, doc.description, doc.type, doc.body))
    for scope, relative, name, description, memory_type, body in files:
        root = roots.project if scope == "project" else roots.user
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_memory_file(name, description, memory_type, body), "utf-8")  # type: ignore[arg-type]
        mtime = NOW - rng.uniform(0, 400) * DAY
        os.utime(path, (mtime, mtime))
    return roots, keys


def old_manifest_keys(candidates: Sequence[Any]) -> set[str]:
    """The manifest before issue #26: ``- [type] <absolute path> (<ISO time>): <description>``
    per line in candidate order, lines that do not fit 25,000 bytes skipped."""
    from cairn.memory.recall.selector import MAX_MODEL_MANIFEST_BYTES, sanitize_manifest_text

    used, kept = 0, set()
    for doc in candidates:
        moment = _dt.datetime.fromtimestamp(doc.mtime, _dt.UTC).isoformat(timespec="milliseconds")
        path = f"{OLD_PREFIX}/{doc.relative_path}"
        line = f"- [{doc.type}] {path} ({moment}Z): {sanitize_manifest_text(doc.description)}"
        cost = len(line.encode("utf-8")) + (1 if kept else 0)
        if used + cost <= MAX_MODEL_MANIFEST_BYTES:
            used += cost
            kept.add(f"{doc.scope}:{doc.relative_path}")
    return kept


def percentiles(samples: Sequence[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.2f} / {p95:.2f}"


def key(doc: Any) -> str:
    return f"{doc.scope}:{doc.relative_path}"


class Bench:
    def __init__(self, store: Any, model: Any) -> None:
        self.store = store
        self.model = model
        self.cpu_ms = 0.0  # CPU time of the last candidates() call

    def candidates(self, query: str, semantic: str | None) -> tuple[list[Any], float]:
        """The selector's candidate list for ``query``, and how long building it took (ms)."""
        from cairn.memory.recall.candidates import (
            LEXICAL_CANDIDATE_LIMIT,
            MAX_MODEL_CANDIDATE_DOCS,
            SEMANTIC_CANDIDATE_LIMIT,
            build_candidates,
        )

        started = time.perf_counter()
        cpu = time.process_time()
        lexical = [hit.doc for hit in self.store.rank(query, limit=LEXICAL_CANDIDATE_LIMIT)]
        from cairn.memory.recall.semantic import nearest_diverse

        similar: Iterable[Any] = []
        taken = {doc.path for doc in lexical}
        if semantic and self.model is not None:
            vector = self.model.embed_query(query)
            if semantic == "diverse":  # chosen as build_candidates reads them, as Recall does
                similar = nearest_diverse(self.store, vector, limit=SEMANTIC_CANDIDATE_LIMIT)
            else:
                similar = self.store.similar(vector, limit=SEMANTIC_CANDIDATE_LIMIT)
                taken |= {doc.path for doc in similar}
        recent = self.store.recent(
            limit=MAX_MODEL_CANDIDATE_DOCS, exclude=lambda doc: doc.path in taken
        )
        built = build_candidates(lexical, recent, limit=5, semantic=similar)
        self.cpu_ms = (time.process_time() - cpu) * 1000
        return built.model, (time.perf_counter() - started) * 1000


def candidate_recall(
    bench: Bench, pairs: Sequence[dict[str, str]], keys: Sequence[str], label: str
) -> dict[str, float]:
    """Print the candidate-list recall table for one set; returns the shipped rule's recall."""
    from cairn.memory.recall.selector import build_manifest

    hits = {"old": 0, "lexical": 0, "nearest": 0, "diverse": 0}
    lines: dict[str, list[int]] = {name: [] for name in hits}
    timings: list[float] = []
    cpu_timings: list[float] = []
    manifest_ms: list[float] = []
    for pair, target in zip(pairs, keys, strict=True):
        lexical, _ = bench.candidates(pair["query"], semantic=None)
        old = old_manifest_keys(lexical)
        hits["old"] += target in old
        lines["old"].append(len(old))
        manifest = build_manifest(lexical)
        lines["lexical"].append(len(manifest.docs))
        hits["lexical"] += target in manifest.docs
        nearest, _ = bench.candidates(pair["query"], semantic="nearest")
        manifest = build_manifest(nearest)
        lines["nearest"].append(len(manifest.docs))
        hits["nearest"] += target in manifest.docs
        both, took = bench.candidates(pair["query"], semantic="diverse")
        started, cpu = time.perf_counter(), time.process_time()
        manifest = build_manifest(both)
        manifest_ms.append((time.perf_counter() - started) * 1000)
        timings.append(took + manifest_ms[-1])
        cpu_timings.append(bench.cpu_ms + (time.process_time() - cpu) * 1000)
        lines["diverse"].append(len(manifest.docs))
        hits["diverse"] += target in manifest.docs
    total = len(pairs)
    rows = {
        "old": "before #26: lexical 180 + newest, old manifest",
        "lexical": "lexical 180 + newest, new manifest",
        "nearest": "lexical + semantic (180 nearest, 2 per lexical) + newest",
        "diverse": "**lexical + semantic (diverse among 1,000 nearest, 2 per lexical) + newest**",
    }
    print(f"\n{label}\n")
    print("| candidates shown to the selector | in the manifest | lines (median) |")
    print("|---|---|---|")
    for name, text in rows.items():
        print(f"| {text} | {hits[name] / total:.1%} | {statistics.median(lines[name]):.0f} |")
    print(f"\ncandidate generation incl. manifest, ms p50 / p95: wall {percentiles(timings)}, "
          f"CPU {percentiles(cpu_timings)} "
          f"(manifest alone, wall {percentiles(manifest_ms)})")  # fmt: skip
    return {name: count / total for name, count in hits.items()}


def fast_hits(
    rank: Callable[[str, int], list[str]], cases: Sequence[tuple[str, Sequence[str]]]
) -> tuple[float, float]:
    at2 = at5 = 0.0
    for query, expected in cases:
        got = rank(query, 5)
        at2 += sum(1 for k in expected if k in got[:2]) / len(expected)
        at5 += sum(1 for k in expected if k in got[:5]) / len(expected)
    return at2 / len(cases), at5 / len(cases)


def eval_set_hits() -> None:
    from cairn.memory.store.memory_store import MemoryStore

    corpus = recall_bench.load_corpus()
    cases = recall_bench.load_cases(corpus)
    with tempfile.TemporaryDirectory(prefix="cairn-eval-") as folder:
        roots = recall_bench.materialize(corpus, Path(folder))
        store = MemoryStore(roots, cache_dir=Path(folder) / "cache")
        store.refresh()

        def rank_case(case: Any) -> list[str]:
            aliases = recall_bench.tool_aliases(case.recent_tools)

            def noisy(doc: Any) -> bool:
                return recall_bench.is_tool_noise(doc.title, doc.description, doc.body, aliases)

            return [key(h.doc) for h in store.rank(case.query, limit=5, exclude=noisy)]

        groups = {
            "all": list(cases),
            "English": [c for c in cases if "en" in c.tags],
            "CJK (zh, ja, ko)": [c for c in cases if {"zh", "ja", "ko"} & set(c.tags)],
        }
        for label, members in groups.items():
            ranked = {case.id: rank_case(case) for case in members}
            at2 = statistics.fmean(
                sum(1 for k in c.expected if k in ranked[c.id][:2]) / len(c.expected)
                for c in members
            )
            at5 = statistics.fmean(
                sum(1 for k in c.expected if k in ranked[c.id][:5]) / len(c.expected)
                for c in members
            )
            print(f"| existing evaluation set, {label} ({len(members)}) | {at2:.1%} | {at5:.1%} |")
        store.close()


def write_path(store: Any, roots: Any, model: Any, runs: int = 15) -> None:
    """One memory written as Extract does (file, refresh, MEMORY.md, saved index), with and
    without computing and saving its vector; alternated, medians."""
    from cairn.memory.recall.semantic import compute_vectors
    from cairn.memory.store.parse import render_memory_file

    plain: list[float] = []
    with_vector: list[float] = []
    for run in range(runs * 2):
        path = roots.project / "project" / f"written-{run}.md"
        text = render_memory_file(
            f"Written {run}", f"A fact saved by extraction number {run}", "project",
            f"The body of memory {run}, long enough to be realistic for a saved fact.",
        )  # fmt: skip
        started = time.perf_counter()
        path.write_text(text, "utf-8")
        store.refresh()
        store.rebuild_index_files()
        store.save()
        if run % 2 and model is not None:
            compute_vectors(store)
            with_vector.append((time.perf_counter() - started) * 1000)
        else:
            plain.append((time.perf_counter() - started) * 1000)
    a, b = statistics.median(plain), statistics.median(with_vector or [0.0])
    print(f"| write one memory (refresh, MEMORY.md, save) | {a:.1f} ms |")
    print(f"| ... and compute + save its vector | {b:.1f} ms (+{(b / a - 1):.0%}) |")


def embed_all(store: Any, model: Any) -> float:
    """Embed every memory of ``store`` as the background catch-up does; returns CPU seconds."""
    from cairn.memory.recall.semantic import compute_vectors

    cpu = time.process_time()
    compute_vectors(store)
    return time.process_time() - cpu


def run_size(
    size: int,
    sets: Sequence[tuple[str, Sequence[dict[str, str]]]],
    variants: bool,
    cache: DigestCache,
) -> None:
    from cairn.memory.store.embedding import load_model
    from cairn.memory.store.memory_store import MemoryStore

    print(f"\n## {size:,} memories")
    started = time.perf_counter()
    model = load_model()
    load_ms = (time.perf_counter() - started) * 1000
    for number, (label, pairs) in enumerate(sets):
        with tempfile.TemporaryDirectory(prefix="cairn-semantic-") as folder:
            roots, keys = build_tree(Path(folder), size, pairs)
            store = MemoryStore(roots, cache_dir=Path(folder) / "cache")
            store.refresh()
            timed = number == 0  # the first set's memory is embedded from nothing, and timed
            store.vector_sync, cache.reading = cache, not timed
            started = time.perf_counter()
            embed_cpu = embed_all(store, model) if model is not None else 0.0
            embed_ms = (time.perf_counter() - started) * 1000
            store.vector_sync = None
            store.save()
            bench = Bench(store, model)
            candidate_recall(bench, pairs, keys, f"### {label}, {len(pairs)} targets")
            cases = [(pair["query"], [target]) for pair, target in zip(pairs, keys, strict=True)]
            at2, at5 = fast_hits(_ranker(store), cases)
            print(f"\nfast phase on this set: hit@2 {at2:.1%}, hit@5 {at5:.1%}")
            if timed:
                timings(store, roots, folder, model, pairs, size, load_ms, embed_ms, embed_cpu)
                if variants and model is not None:
                    compare_variants(store, model, pairs, keys)
            store.close()


def _ranker(store: Any) -> Callable[[str, int], list[str]]:
    return lambda query, count: [key(hit.doc) for hit in store.rank(query, limit=count)]


def timings(
    store: Any, roots: Any, folder: str, model: Any, pairs: Any, size: int,
    load_ms: float, embed_ms: float, embed_cpu: float,
) -> None:  # fmt: skip
    from cairn.memory.store.memory_store import MemoryStore

    print("\n| fast phase | hit@2 | hit@5 |\n|---|---|---|")
    if size == min(SIZES):
        eval_set_hits()
    queries = [pair["query"] for pair in pairs] + [
        case.query for case in recall_bench.load_cases(recall_bench.load_corpus())
    ]
    fast: list[float] = []
    fast_cpu: list[float] = []
    for _ in range(3):
        for query in queries:
            begun, cpu = time.perf_counter(), time.process_time()
            store.rank(query, limit=2)
            fast.append((time.perf_counter() - begun) * 1000)
            fast_cpu.append((time.process_time() - cpu) * 1000)
    query_cpu: list[float] = []
    if model is not None:
        for query in queries:
            cpu = time.process_time()
            model.embed_query(query)
            query_cpu.append((time.process_time() - cpu) * 1000)
    reopened = MemoryStore(roots, cache_dir=Path(folder) / "cache")
    reopened.refresh()
    started = time.perf_counter()
    if model is not None:
        reopened.load_vectors(model)
    vec_load_ms = (time.perf_counter() - started) * 1000
    reopened.close()
    print("\n| latency | ms |\n|---|---|")
    print(f"| fast phase: rank top 2, p50 / p95 ({len(fast)} queries) "
          f"| wall {percentiles(fast)}, CPU {percentiles(fast_cpu)} |")  # fmt: skip
    if query_cpu:
        print(f"| embed a query, CPU p50 / p95 | {percentiles(query_cpu)} |")
    print(f"| load the embedding model (first use in a process) | {load_ms:.0f} |")
    print(f"| embed all {size:,} memories (background) | wall {embed_ms / 1000:.1f} s, CPU "
          f"{embed_cpu:.1f} s ({embed_cpu / size * 1e6:.0f} µs CPU a memory) |")  # fmt: skip
    print(f"| load the saved vectors (new process) | {vec_load_ms:.1f} |")
    write_path(store, roots, model)


def compare_variants(store: Any, model: Any, pairs: Sequence[Any], keys: Sequence[str]) -> None:
    """Semantic top-180 recall by what a memory's vector is made from."""
    import numpy as np

    docs = store.docs()
    index = {key(doc): row for row, doc in enumerate(docs)}
    variants = {
        "name + description": lambda d: f"{d.title}\n{d.description}",
        "name + description + body[:600] (chosen)": lambda d: (
            f"{d.title}\n{d.description}\n{d.body[:600]}"
        ),
        "whole body too": lambda d: f"{d.title}\n{d.description}\n{d.body}",
    }
    queries = model.embed([pair["query"] for pair in pairs])
    print("\n| vector made from | semantic top 180 | top 20 |\n|---|---|---|")
    for label, text in variants.items():
        matrix = model.embed([text(doc) for doc in docs])
        scores = queries @ matrix.T
        at180 = at20 = 0
        for row, target in enumerate(keys):
            order = np.argsort(-scores[row])
            rank = int(np.nonzero(order == index[target])[0][0])
            at180 += rank < 180
            at20 += rank < 20
        print(f"| {label} | {at180 / len(keys):.1%} | {at20 / len(keys):.1%} |")


SIZES: tuple[int, ...] = (1000, 10000)


def main() -> None:
    global SIZES
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--variants", action="store_true", help="compare embedded texts")
    parser.add_argument("--models", action="store_true", help="compare embedding models")
    args = parser.parse_args()
    SIZES = tuple(int(size) for size in args.sizes.split(","))
    sets = [("paraphrase set", load_pairs(PAIRS)), ("held-out part", load_pairs(HELD_OUT))]
    started = time.time()
    if args.models:
        import recall_models

        recall_models.compare(SIZES, sets)
    else:
        cache = DigestCache()
        for size in SIZES:
            run_size(size, sets, args.variants, cache)
    load = os.getloadavg()
    print(f"\n{time.strftime('%a %b %d %H:%M UTC %Y', time.gmtime(started))}, "
          f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")  # fmt: skip
    asyncio.set_event_loop_policy(None)


if __name__ == "__main__":
    main()
