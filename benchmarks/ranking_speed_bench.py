"""Recall's ranking speed, before and after a change, interleaved in one run (issues #26, #28).

Usage (from the repository root)::

    .venv/bin/python benchmarks/ranking_speed_bench.py --work /tmp/ranking --baseline OTHER/src

Two figures, each measured in fresh processes that alternate between this tree and the
``--baseline`` tree (another checkout's ``src``, first on ``PYTHONPATH``), ``--rounds`` times:

- **warm fast-phase rank** at ``--rank-size`` memories (default 100,000; issue #28): the
  memories of ``memory_scale_bench.py`` (same generator, same queries: ``refresh`` +
  ``rank`` top 10), median and p95 of ``--queries`` queries, wall and CPU;
- **candidate generation** at ``--candidates-size`` memories (default 10,000; issue #26): the
  paraphrase set's tuning pairs mixed into ``recall_semantic_bench.py``'s distractors, every
  memory embedded once; per query the steps of Recall's refined phase (lexical top 180, the
  query's embedding, the 1,000 nearest, the diverse choice, the newest, the candidate list,
  the manifest), CPU medians per step, and candidate-list recall (deterministic). Where the
  diverse choice is lazy (``iter_diverse_order``: chosen as the candidate list reads them),
  its time is taken out of the candidate list's and counted as the diverse choice's.

The memories, their saved index and their vectors are made once in ``--work`` and reused by
later runs (the 100,000 first scan and embedding 10,000 memories take minutes;
``--candidates-dir`` names the folder of the second). Both trees must
read the same index and vector formats. Each figure is the median over the rounds of each
run's figure; "best" is the best run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_RANK_CHILD = r"""
import json, statistics, sys, time
from pathlib import Path
from cairn.memory.paths import memory_roots
from cairn.memory.store.memory_store import MemoryStore

project, queries, words = Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
store = MemoryStore(memory_roots(project))
store.refresh(provisional=True)
store.rank("how do we deploy the billing service", limit=5)
store.refresh()
wall, cpu = [], []
for n in range(queries):
    query = f"{words[n % len(words)]} {words[(n * 7) % len(words)]} in area {n % 31}"
    began, used = time.perf_counter(), time.process_time()
    store.refresh(provisional=True)
    store.rank(query, limit=10)
    wall.append(time.perf_counter() - began)
    cpu.append(time.process_time() - used)
print(json.dumps({"wall": wall, "cpu": cpu}))
"""

_CANDIDATES_CHILD = r"""
import json, statistics, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
import recall_semantic_bench as bench
from cairn.memory.paths import MemoryRoots
from cairn.memory.recall import semantic
from cairn.memory.recall.candidates import (
    LEXICAL_CANDIDATE_LIMIT, MAX_MODEL_CANDIDATE_DOCS, SEMANTIC_CANDIDATE_LIMIT, build_candidates,
)
from cairn.memory.recall.selector import build_manifest
from cairn.memory.store.embedding import load_model
from cairn.memory.store.memory_store import MemoryStore

base, rounds = Path(sys.argv[1]), int(sys.argv[3])
roots = MemoryRoots(project=base / "p" / "memory", user=base / "u", state_dir=base / "p")
store = MemoryStore(roots, cache_dir=base / "cache")
store.refresh()
model = load_model()
store.load_vectors(model)
assert not store.vector_jobs(), "vectors missing"
pairs = bench.load_pairs(bench.PAIRS)
keys = (base / "keys.txt").read_text().split("\n")
steps = {name: [] for name in ("lexical", "embed", "nearest", "diverse", "newest", "candidates",
                               "manifest", "total")}
found = 0
clock = time.process_time
LAZY = hasattr(semantic, "iter_diverse_order")  # this tree: semantic candidates chosen lazily

def timed(items, spent):
    items = iter(items)
    while True:
        began = clock()
        item = next(items, None)
        spent[0] += clock() - began
        if item is None:
            return
        yield item

for number in range(rounds):
    for pair, target in zip(pairs, keys):
        query = pair["query"]
        t0 = clock()
        lexical = [hit.doc for hit in store.rank(query, limit=LEXICAL_CANDIDATE_LIMIT)]
        t1 = clock()
        vector = model.embed_query(query)
        t2 = clock()
        pool, vectors = store.nearest(vector, limit=semantic.DIVERSITY_POOL)
        t3 = clock()
        spent = [0.0]
        if LAZY:  # chosen as the candidate list reads them: their time counts as "diverse"
            order = semantic.iter_diverse_order(vector, vectors, limit=SEMANTIC_CANDIDATE_LIMIT)
            similar = timed((pool[index] for index in order), spent)
            taken = {doc.path for doc in lexical}
        else:
            order = semantic.diverse_order(vector, vectors, limit=SEMANTIC_CANDIDATE_LIMIT)
            similar = [pool[index] for index in order]
            taken = {doc.path for doc in [*lexical, *similar]}
        t4 = clock()
        recent = store.recent(limit=MAX_MODEL_CANDIDATE_DOCS, exclude=lambda d: d.path in taken)
        t5 = clock()
        built = build_candidates(lexical, recent, limit=5, semantic=similar)
        t6 = clock()
        manifest = build_manifest(built.model)
        t7 = clock()
        marks = (t0, t1, t2, t3, t4, t5, t6, t7)
        for name, start, end in zip(steps, marks, [*marks[1:], t7]):
            steps[name].append((end - start) * 1000)
        steps["diverse"][-1] += spent[0] * 1000
        steps["candidates"][-1] -= spent[0] * 1000
        steps["total"][-1] = (t7 - t0) * 1000
        if number == 0:
            found += target in manifest.docs
print(json.dumps({"steps": steps, "recall": found / len(pairs)}))
"""


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def _child(tree: Path, script: str, *args: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**env, "PYTHONPATH": str(tree)}, cwd=ROOT, capture_output=True, text=True,
        timeout=7200,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def prepare_rank(work: Path, count: int) -> tuple[Path, dict[str, str]]:
    """``memory_scale_bench``'s memories and saved index, made once in ``work``."""
    sys.path.insert(0, str(HERE))
    import memory_scale_bench as scale

    print(f"{count:,} memories and their index in {work} (made once)", flush=True)
    home, project, env = scale.corpus(count, work)
    if not scale.saved(home):
        scan = _child(ROOT / "src", scale._CHILD, "scan", str(project), env=env)
        assert scan["docs"] == count, scan
    return project, env


def prepare_candidates(base: Path, count: int) -> Path:
    """The paraphrase pairs in ``count`` memories, every vector computed, made once in ``base``
    (saved vectors name their folder: it cannot be moved afterwards)."""
    sys.path.insert(0, str(HERE))
    import recall_semantic_bench as semantic_bench

    from cairn.memory.recall.semantic import compute_vectors
    from cairn.memory.store.memory_store import MemoryStore

    if not (base / "keys.txt").exists():
        print(f"making and embedding {count:,} memories in {base} (once)", flush=True)
        roots, keys = semantic_bench.build_tree(base, count, semantic_bench.load_pairs())
        store = MemoryStore(roots, cache_dir=base / "cache")
        store.refresh()
        compute_vectors(store)
        store.save()
        store.close()
        (base / "keys.txt").write_text("\n".join(keys))
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="memories made once, reused")
    parser.add_argument("--baseline", type=Path, required=True, help="another tree's src folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rank-size", type=int, default=100_000, help="0 skips")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--candidates-size", type=int, default=10_000, help="0 skips")
    parser.add_argument("--candidate-rounds", type=int, default=2, help="passes over the pairs")
    parser.add_argument("--candidates-dir", type=Path, help="default: WORK/paraphrase-SIZE")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    trees = {"baseline": args.baseline.resolve(), "this tree": ROOT / "src"}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    rank: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    steps: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    recall: dict[str, float] = {}
    if args.rank_size:
        project, env = prepare_rank(args.work, args.rank_size)
        words = json.dumps(["deploy", "billing", "pytest", "docker", "release", "schema",
                            "login", "cache"])  # fmt: skip
        for _ in range(args.rounds):
            for name, tree in trees.items():
                run = _child(tree, _RANK_CHILD, str(project), str(args.queries), words, env=env)
                rank[name].append({
                    "wall p50": statistics.median(run["wall"]) * 1000,
                    "wall p95": _percentile(run["wall"], 0.95) * 1000,
                    "CPU p50": statistics.median(run["cpu"]) * 1000,
                    "CPU p95": _percentile(run["cpu"], 0.95) * 1000,
                })  # fmt: skip
    if args.candidates_size:
        folder = args.candidates_dir or args.work / f"paraphrase-{args.candidates_size}"
        base = prepare_candidates(folder, args.candidates_size)
        for _ in range(args.rounds):
            for name, tree in trees.items():
                run = _child(tree, _CANDIDATES_CHILD, str(base), str(HERE),
                             str(args.candidate_rounds), env=dict(os.environ))  # fmt: skip
                figures = {step: statistics.median(v) for step, v in run["steps"].items()}
                figures["total p95"] = _percentile(run["steps"]["total"], 0.95)
                steps[name].append(figures)
                recall[name] = run["recall"]
    print(f"\n{started}, load {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
          f"{args.rounds} runs of each tree, interleaved; median of runs (best run)\n")  # fmt: skip
    for title, table in ((f"warm fast-phase rank, {args.rank_size:,} memories, ms", rank),
                         (f"candidate generation, {args.candidates_size:,} memories, CPU ms "
                          "(medians per step)", steps)):  # fmt: skip
        if not table["baseline"]:
            continue
        print(f"| {title} | baseline | this tree |\n|---|---|---|")
        for figure in table["baseline"][0]:
            cells = []
            for name in trees:
                values = [run[figure] for run in table[name]]
                cells.append(f"{statistics.median(values):.2f} ({min(values):.2f})")
            print(f"| {figure} | " + " | ".join(cells) + " |")
        print()
    if recall:
        print(f"candidate-list recall (tuning pairs): baseline {recall['baseline']:.1%}, "
              f"this tree {recall['this tree']:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
