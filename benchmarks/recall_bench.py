"""Recall fast phase: quality on the committed evaluation set, speed on synthetic memory pools.

Usage (from the repository root)::

    .venv/bin/python benchmarks/recall_bench.py                    # quality, then speed
    .venv/bin/python benchmarks/recall_bench.py --quality          # quality tables only
    .venv/bin/python benchmarks/recall_bench.py --speed --sizes 100,1000,10000,50000

Quality: Recall@2 of the fast phase (what the first model request receives) and Recall@5 of
fast + refined, for cairn's BM25F store, the reference system's rule (implemented below as the
baseline), plain single-field BM25 and a random pick. Speed: ranking alone, the whole warm fast
phase (refresh + rank + render of the top 2), how long ``recall_memories`` takes to publish that
result, cold starts in a real subprocess, and re-indexing one changed file, on pools of 100 to
50,000 files, with the reference rule on the same pools.

The README next to this file records the figures, the command and the machine.
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()  # the cold probe measures from here: before any cairn import

import argparse  # noqa: E402 - after the start stamp on purpose
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import unicodedata  # noqa: E402
from collections.abc import Callable, Iterable, Sequence  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any, cast  # noqa: E402

if TYPE_CHECKING:
    from cairn.memory.document import MemoryScope, MemoryType

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "recall_eval"
DAY = 86_400.0
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z: fixed so ages (and ties) are reproducible
FAST_DOCS = 2  # fast-phase result size (reference MAX_FAST_RECALL_DOCS)
DELIVERED_DOCS = 5  # docs counted for Recall@5 of fast + refined
SELECTOR_PICKS = 5  # the selector's "up to 5"
MAX_CANDIDATES = 200  # selector candidates (reference MAX_MODEL_CANDIDATE_DOCS)
RECENT_RESERVE = 20  # of which kept for the most recent docs (RECENT_MODEL_CANDIDATE_RESERVE)
REFERENCE_BODY_CHARS = 1_200  # the reference scores only this much of a body
RANDOM_TRIALS = 200  # random-baseline draws per case
TREE_VERSION = 3  # bump when the synthetic generator changes (cached trees are rebuilt)


# --------------------------------------------------------------------------------------------
# The evaluation set
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalDoc:
    scope: str  # "project" | "user"
    path: str  # relative to its root
    type: str
    name: str
    description: str
    body: str
    age_days: float

    @property
    def key(self) -> str:
        return f"{self.scope}:{self.path}"


@dataclass(frozen=True)
class EvalCase:
    id: str
    query: str
    expected: tuple[str, ...]  # "scope:relative/path.md"
    recent_tools: tuple[str, ...]
    tags: tuple[str, ...]
    split: str  # "dev" (used to choose parameters) or "test" (reported only)


def load_corpus() -> list[EvalDoc]:
    import yaml

    docs: list[EvalDoc] = []
    for scope in ("project", "user"):
        for raw in yaml.safe_load((DATA / f"corpus_{scope}.yaml").read_text(encoding="utf-8")):
            docs.append(
                EvalDoc(
                    scope=scope,
                    path=raw["path"],
                    type=raw["type"],
                    name=str(raw["name"]),
                    description=str(raw["description"]),
                    body=str(raw["body"]).strip(),
                    age_days=float(raw["age_days"]),
                )
            )
    return docs


def load_cases(corpus: Sequence[EvalDoc]) -> list[EvalCase]:
    """Cases in file order; every other one is dev (0, 2, 4, ...), the rest test."""
    import yaml

    known = {doc.key for doc in corpus}
    cases: list[EvalCase] = []
    raw_cases = yaml.safe_load((DATA / "cases.yaml").read_text(encoding="utf-8"))
    for position, raw in enumerate(raw_cases):
        expected = tuple(raw["expected"])
        missing = [key for key in expected if key not in known]
        if missing:
            raise SystemExit(f"case {raw['id']}: unknown expected memory {missing}")
        cases.append(
            EvalCase(
                id=raw["id"],
                query=raw["query"],
                expected=expected,
                recent_tools=tuple(raw.get("recent_tools") or ()),
                tags=tuple(raw.get("tags") or ()),
                split="dev" if position % 2 == 0 else "test",
            )
        )
    return cases


def write_doc(root: Path, relative: str, doc_text: str, mtime: float) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc_text, encoding="utf-8")
    os.utime(path, (mtime, mtime))


def materialize(docs: Iterable[EvalDoc], base: Path) -> Any:
    """Write the docs under ``base`` as real memory files; returns the MemoryRoots."""
    from cairn.memory.paths import MemoryRoots

    roots = MemoryRoots(
        project=base / "projects" / "ledgerline" / "memory",
        user=base / "memories",
        state_dir=base / "projects" / "ledgerline",
    )
    materialize_into(docs, roots)
    return roots


def materialize_into(docs: Iterable[EvalDoc], roots: Any) -> None:
    from cairn.memory.store.parse import render_memory_file

    for doc in docs:
        root = roots.project if doc.scope == "project" else roots.user
        memory_type = cast("MemoryType", doc.type)
        text = render_memory_file(doc.name, doc.description, memory_type, doc.body)
        write_doc(root, doc.path, text, NOW - doc.age_days * DAY)


# --------------------------------------------------------------------------------------------
# The reference rule (baseline) and its neighbours: noise filter, candidates, scripted selector
# --------------------------------------------------------------------------------------------

REFERENCE_TYPE_KEYWORDS = {
    "user": {"user", "preference", "preferences", "background", "role", "terse"},
    "feedback": {"feedback", "rule", "rules", "avoid", "style", "summary"},
    "project": {"project", "goal", "goals", "incident", "deadline", "release"},
    "reference": {"reference", "dashboard", "ticket", "docs", "doc", "link"},
}
DURABLE_MARKERS = (
    "credential", "credentials", "escalation", "gotcha", "gotchas", "known issue", "known issues",
    "owner", "ownership", "warning", "warnings", "workaround", "workarounds",
)  # fmt: skip
USAGE_MARKERS = (
    "api docs", "api documentation", "failed call", "failed tool call", "failed tool-call",
    "field mapping", "field mappings", "guessed call", "guessed tool", "mcp tool",
    "parameter schema", "parameter schemas", "tool schema", "tool schemas", "tool usage",
    "usage reference",
)  # fmt: skip


def tool_aliases(tools: Iterable[str]) -> set[str]:
    """The reference's aliases of recently used tool names (§2.6)."""
    aliases: set[str] = set()
    for tool in tools:
        name = tool.strip().lower()
        if not name:
            continue
        aliases.add(name)
        if "::" in name:
            aliases.add(name.rsplit("::", 1)[1])
        parts = name.split("__")
        if name.startswith("mcp__") and len(parts) >= 3:
            aliases.add("__".join(parts[2:]))
            aliases.add(parts[-1])
    return aliases


def is_tool_noise(title: str, description: str, body: str, aliases: set[str]) -> bool:
    """The reference's recent-tool noise rule: about a recent tool, usage-only, nothing durable."""
    if not aliases:
        return False
    haystack = f"{title} {description} {body}".lower()
    return (
        any(alias in haystack for alias in aliases)
        and not any(marker in haystack for marker in DURABLE_MARKERS)
        and any(marker in haystack for marker in USAGE_MARKERS)
    )


def _nfkc_lower(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


@dataclass
class PoolDoc:
    """A document as the baselines see it (order = the store's docs() order)."""

    key: str
    type: str
    title: str
    description: str
    body: str
    mtime: float
    position: int


def reference_score(tokens: Sequence[str], doc: Any) -> int:
    """The reference's legacy score (§2.3), re-normalising the document on every call."""
    title = _nfkc_lower(doc.title)
    description = _nfkc_lower(doc.description)
    body = _nfkc_lower(doc.body[:REFERENCE_BODY_CHARS])
    lexical = 0
    for token in tokens:
        lexical += 4 * (token in title) + 3 * (token in description) + (token in body)
    if lexical == 0:
        return 0
    keywords = REFERENCE_TYPE_KEYWORDS.get(doc.type, set())
    return lexical + min(sum(1 for token in tokens if token in keywords), 2)


def reference_rank(query: str, pool: Sequence[Any], limit: int) -> list[Any]:
    """The reference's selection (§2.3) over documents in input order (title, description,
    body, type, mtime): score > 0, then score desc, mtime desc, input order."""
    from cairn.memory.store.tokenizer import query_tokens, surface_tokens

    tokens = query_tokens(query, surface_tokens)  # the reference does not stem
    kept = [
        (-score, -doc.mtime, position, doc)
        for position, doc in enumerate(pool)
        if (score := reference_score(tokens, doc)) > 0
    ]
    kept.sort(key=lambda item: item[:3])
    return [doc for *_, doc in kept[:limit]]


class PlainBM25:
    """Textbook BM25 over one field (title + description + body), same tokenizer and ties."""

    K1 = 1.2
    B = 0.75

    def __init__(self, pool: Sequence[PoolDoc]) -> None:
        from collections import Counter

        from cairn.memory.store.tokenizer import tokenize

        self.pool = list(pool)
        self.tfs = [
            Counter(tokenize(f"{doc.title}\n{doc.description}\n{doc.body}")) for doc in pool
        ]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.average = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        self.df: Counter[str] = Counter()
        for tf in self.tfs:
            self.df.update(tf.keys())

    def rank(self, query: str, limit: int, keep: Callable[[PoolDoc], bool]) -> list[PoolDoc]:
        from cairn.memory.store.tokenizer import query_tokens

        terms = query_tokens(query)
        n = len(self.pool)
        scored: list[tuple[float, PoolDoc]] = []
        for doc, tf, length in zip(self.pool, self.tfs, self.lengths, strict=True):
            if not keep(doc):
                continue
            score = 0.0
            norm = self.K1 * (1 - self.B + self.B * length / self.average)
            for term in terms:
                count = tf.get(term, 0)
                if count:
                    df = self.df[term]
                    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                    score += idf * count * (self.K1 + 1) / (count + norm)
            if score > 0:
                scored.append((score, doc))
        scored.sort(key=lambda item: (-item[0], -item[1].mtime, item[1].position))
        return [doc for _, doc in scored[:limit]]


def selector_candidates(lexical: Sequence[PoolDoc], eligible: Sequence[PoolDoc]) -> list[PoolDoc]:
    """The reference's candidate list (§2.4): lexical <= 180 interleaved with the most recent."""
    model_lexical = list(lexical[: MAX_CANDIDATES - RECENT_RESERVE])
    chosen = {doc.key for doc in model_lexical}
    recent = sorted(
        (doc for doc in eligible if doc.key not in chosen),
        key=lambda doc: (-doc.mtime, doc.position),
    )[: MAX_CANDIDATES - len(model_lexical)]
    merged: list[PoolDoc] = []
    for i, doc in enumerate(model_lexical):
        merged.append(doc)
        if i < len(recent):
            merged.append(recent[i])
    merged.extend(recent[len(model_lexical) :])
    return merged


def scripted_selector(query: str, candidates: Sequence[PoolDoc]) -> list[PoolDoc]:
    """A deterministic stand-in for the model selector, seeing what the model sees.

    The model's manifest line is ``- [type] path (mtime): description``; this selector scores
    each candidate by how many distinct query tokens occur among the tokens of its description
    and of its file path, keeps those with at least one, and picks the 5 best (ties: candidate
    order). It is a lexical stand-in, so it cannot show what a model adds on paraphrases; it
    shows what widening the pool to 200 candidates and re-reading descriptions recovers.
    """
    from cairn.memory.store.tokenizer import query_tokens, tokenize

    wanted = set(query_tokens(query))
    scored: list[tuple[int, int, PoolDoc]] = []
    for position, doc in enumerate(candidates):
        seen = set(tokenize(f"{doc.key.split(':', 1)[1]} {doc.description}"))
        overlap = len(wanted & seen)
        if overlap:
            scored.append((-overlap, position, doc))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [doc for _, _, doc in scored[:SELECTOR_PICKS]]


def deliver(fast: Sequence[PoolDoc], refined: Sequence[PoolDoc]) -> list[PoolDoc]:
    """The fast docs, then the refined ones not already delivered: the first 5 a turn sees."""
    delivered = list(fast)
    seen = {doc.key for doc in fast}
    delivered.extend(doc for doc in refined if doc.key not in seen)
    return delivered[:DELIVERED_DOCS]


# --------------------------------------------------------------------------------------------
# Quality
# --------------------------------------------------------------------------------------------


def _render(docs: Sequence[Any], now: float) -> str:
    """The recalled-memory prompt, rendered by cairn's renderer (the reference layout)."""
    from cairn.memory.recall.render import render_relevant_memory

    return render_relevant_memory(docs, now=now)


def recall_at(expected: Sequence[str], got: Sequence[PoolDoc]) -> float:
    keys = {doc.key for doc in got}
    return sum(1 for key in expected if key in keys) / len(expected)


@dataclass
class QualityRow:
    name: str
    at2: dict[str, float] = field(default_factory=dict)  # slice -> Recall@2
    at5: dict[str, float] = field(default_factory=dict)  # slice -> Recall@5 fast + refined


def _slices(cases: Sequence[EvalCase]) -> dict[str, list[EvalCase]]:
    slices: dict[str, list[EvalCase]] = {
        "all": list(cases),
        "dev": [case for case in cases if case.split == "dev"],
        "test": [case for case in cases if case.split == "test"],
    }
    for tag in sorted({tag for case in cases for tag in case.tags}):
        slices[tag] = [case for case in cases if tag in case.tags]
    return slices


def build_pool(store: Any) -> tuple[list[PoolDoc], dict[str, Any]]:
    docs = store.docs()
    pool = [
        PoolDoc(f"{doc.scope}:{doc.relative_path}", doc.type, doc.title, doc.description,
                doc.body, doc.mtime, position)
        for position, doc in enumerate(docs)
    ]  # fmt: skip
    return pool, {pool_doc.key: doc for pool_doc, doc in zip(pool, docs, strict=True)}


def _noise_keep(case: EvalCase) -> Callable[[PoolDoc], bool]:
    aliases = tool_aliases(case.recent_tools)
    return lambda doc: not is_tool_noise(doc.title, doc.description, doc.body, aliases)


def evaluate_quality(
    store: Any, pool: Sequence[PoolDoc], cases: Sequence[EvalCase]
) -> list[QualityRow]:
    by_key = {doc.key: doc for doc in pool}
    bm25 = PlainBM25(pool)

    def fast_lexical(case: EvalCase, limit: int) -> list[PoolDoc]:
        aliases = tool_aliases(case.recent_tools)

        def noisy(doc: Any) -> bool:
            return is_tool_noise(doc.title, doc.description, doc.body, aliases)

        ranked = store.rank(case.query, limit=limit, exclude=noisy)
        return [by_key[f"{hit.doc.scope}:{hit.doc.relative_path}"] for hit in ranked]

    def reference_lexical(case: EvalCase, limit: int) -> list[PoolDoc]:
        keep = _noise_keep(case)
        return reference_rank(case.query, [doc for doc in pool if keep(doc)], limit)

    methods = {
        "cairn BM25F (fast phase)": fast_lexical,
        "reference rule": reference_lexical,
        "plain BM25 (one field)": lambda case, limit: bm25.rank(
            case.query, limit, _noise_keep(case)
        ),
    }
    rows: list[QualityRow] = []
    slices = _slices(cases)
    for name, lexical in methods.items():
        at2: dict[str, float] = {}
        at5: dict[str, float] = {}
        per_case2: dict[str, float] = {}
        per_case5: dict[str, float] = {}
        for case in cases:
            keep = _noise_keep(case)
            ranked = lexical(case, MAX_CANDIDATES - RECENT_RESERVE)
            fast = ranked[:FAST_DOCS]
            eligible = [doc for doc in pool if keep(doc)]
            candidates = selector_candidates(ranked, eligible)
            refined = scripted_selector(case.query, candidates)
            per_case2[case.id] = recall_at(case.expected, fast)
            per_case5[case.id] = recall_at(case.expected, deliver(fast, refined))
        for label, members in slices.items():
            at2[label] = statistics.fmean(per_case2[case.id] for case in members)
            at5[label] = statistics.fmean(per_case5[case.id] for case in members)
        rows.append(QualityRow(name, at2, at5))
    rows.append(_random_row(pool, cases, slices))
    return rows


def _random_row(
    pool: Sequence[PoolDoc], cases: Sequence[EvalCase], slices: dict[str, list[EvalCase]]
) -> QualityRow:
    rng = random.Random(7)
    at2: dict[str, float] = {}
    at5: dict[str, float] = {}
    per2: dict[str, float] = {}
    per5: dict[str, float] = {}
    for case in cases:
        eligible = [doc for doc in pool if _noise_keep(case)(doc)]
        hits2 = hits5 = 0.0
        for _ in range(RANDOM_TRIALS):
            picked = rng.sample(eligible, DELIVERED_DOCS)
            hits2 += recall_at(case.expected, picked[:FAST_DOCS])
            hits5 += recall_at(case.expected, picked)
        per2[case.id] = hits2 / RANDOM_TRIALS
        per5[case.id] = hits5 / RANDOM_TRIALS
    for label, members in slices.items():
        at2[label] = statistics.fmean(per2[case.id] for case in members)
        at5[label] = statistics.fmean(per5[case.id] for case in members)
    return QualityRow("random", at2, at5)


def print_quality(rows: Sequence[QualityRow], cases: Sequence[EvalCase], docs: int) -> None:
    slices = _slices(cases)
    print(f"\n## Recall quality — {len(cases)} cases over {docs} memories")
    print("Recall@2 = fast phase (top 2); Recall@5 = fast + refined (scripted selector)\n")
    labels = list(slices)
    header = "| slice (cases) | " + " | ".join(f"{row.name} @2 / @5" for row in rows) + " |"
    print(header)
    print("|" + "---|" * (len(rows) + 1))
    for label in labels:
        cells = [f"{row.at2[label]:.0%} / {row.at5[label]:.0%}" for row in rows]
        print(f"| {label} ({len(slices[label])}) | " + " | ".join(cells) + " |")


def quality_main(show_misses: bool) -> None:
    import tempfile

    from cairn.memory.store.memory_store import MemoryStore

    corpus = load_corpus()
    cases = load_cases(corpus)
    with tempfile.TemporaryDirectory(prefix="cairn-recall-eval-") as folder:
        roots = materialize(corpus, Path(folder))
        store = MemoryStore(roots, cache_dir=Path(folder) / "cache")
        store.refresh()
        pool, _ = build_pool(store)
        rows = evaluate_quality(store, pool, cases)
        print_quality(rows, cases, len(pool))
        if show_misses:
            _print_misses(store, pool, cases)


# --------------------------------------------------------------------------------------------
# Parameter choice on the dev split (--tune)
# --------------------------------------------------------------------------------------------

TUNE_GRID = {
    "title_weight": (1.0, 2.0, 3.0, 4.0),
    "description_weight": (1.0, 2.0, 3.0),
    "k1": (0.9, 1.2, 1.6),
    "title_b": (0.0, 0.3),
    "body_b": (0.5, 0.75),
    "body_length": (80.0, 200.0),
}
TYPE_BONUS_STEPS = (0.0, 0.25, 0.5, 1.0)  # the reference's type-keyword bonus, per keyword


def _dev_figures(store: Any, cases: Sequence[EvalCase], bonus: float = 0.0) -> tuple[float, float]:
    """(Recall@2, MRR@10) on ``cases``; ``bonus`` adds the reference's type-keyword bonus."""
    from cairn.memory.store.tokenizer import query_tokens

    at2: list[float] = []
    reciprocal: list[float] = []
    for case in cases:
        aliases = tool_aliases(case.recent_tools)
        hits = store.rank(
            case.query,
            limit=MAX_CANDIDATES - RECENT_RESERVE,
            exclude=lambda doc, aliases=aliases: is_tool_noise(
                doc.title, doc.description, doc.body, aliases
            ),
        )
        tokens = query_tokens(case.query)

        def type_hits(memory_type: str, tokens: list[str] = tokens) -> int:
            return min(sum(token in REFERENCE_TYPE_KEYWORDS[memory_type] for token in tokens), 2)

        rescored = [
            (hit.score + bonus * type_hits(hit.doc.type), -hit.doc.mtime, position,
             f"{hit.doc.scope}:{hit.doc.relative_path}")
            for position, hit in enumerate(hits)
        ]  # fmt: skip
        rescored.sort(key=lambda item: (-item[0], item[1], item[2]))
        keys = [key for *_, key in rescored[:10]]
        at2.append(sum(key in keys[:2] for key in case.expected) / len(case.expected))
        reciprocal.append(
            statistics.fmean(
                1 / (keys.index(key) + 1) if key in keys else 0.0 for key in case.expected
            )
        )
    return statistics.fmean(at2), statistics.fmean(reciprocal)


def tune_main() -> None:
    """Grid-search the BM25F parameters on the dev split; report the choice on test once."""
    import itertools
    import tempfile

    from cairn.memory.store.memory_store import MemoryStore
    from cairn.memory.store.scorer import DEFAULT_SCORER, ScorerConfig

    corpus = load_corpus()
    cases = load_cases(corpus)
    dev = [case for case in cases if case.split == "dev"]
    test = [case for case in cases if case.split == "test"]
    with tempfile.TemporaryDirectory(prefix="cairn-recall-tune-") as folder:
        roots = materialize(corpus, Path(folder))

        def figures(
            config: Any, chosen: Sequence[EvalCase], bonus: float = 0.0
        ) -> tuple[float, float]:
            store = MemoryStore(roots, scorer=config, watch=False)
            return _dev_figures(store, chosen, bonus)

        names = list(TUNE_GRID)
        results = []
        for values in itertools.product(*TUNE_GRID.values()):
            config = ScorerConfig(**dict(zip(names, values, strict=True)))
            results.append((figures(config, dev), values, config))
        results.sort(key=lambda item: (-item[0][0], -item[0][1]))
        print(f"\n## BM25F grid on the dev split ({len(dev)} cases, {len(results)} settings)\n")
        print("| " + " | ".join(names) + " | dev Recall@2 | dev MRR@10 |")
        print("|" + "---|" * (len(names) + 2))
        for (at2, mrr), values, _ in results[:8]:
            print(
                "| " + " | ".join(f"{value:g}" for value in values) + f" | {at2:.1%} | {mrr:.3f} |"
            )
        (worst_at2, worst_mrr), worst_values, _ = results[-1]
        worst = ", ".join(f"{value:g}" for value in worst_values)
        print(f"\nworst setting ({worst}): dev Recall@2 {worst_at2:.1%}, MRR@10 {worst_mrr:.3f}")
        print("\nType-keyword bonus on the default scorer (dev):")
        for bonus in TYPE_BONUS_STEPS:
            at2, mrr = figures(DEFAULT_SCORER, dev, bonus)
            print(f"  bonus {bonus:g} per keyword: Recall@2 {at2:.1%}, MRR@10 {mrr:.3f}")
        at2, mrr = figures(DEFAULT_SCORER, test)
        print(f"\nDefault scorer, test split ({len(test)}): Recall@2 {at2:.1%}, MRR@10 {mrr:.3f}")


def _print_misses(store: Any, pool: Sequence[PoolDoc], cases: Sequence[EvalCase]) -> None:
    print("\nfast-phase misses (top 2 lacks an expected memory):")
    for case in cases:
        aliases = tool_aliases(case.recent_tools)
        ranked = store.rank(
            case.query,
            limit=FAST_DOCS,
            exclude=lambda doc, aliases=aliases: is_tool_noise(
                doc.title, doc.description, doc.body, aliases
            ),
        )
        got = [f"{hit.doc.scope}:{hit.doc.relative_path}" for hit in ranked]
        if any(key not in got for key in case.expected):
            print(f"  {case.id} [{case.split}] {case.query!r}: expected {case.expected}, got {got}")


# --------------------------------------------------------------------------------------------
# Synthetic pools for speed
# --------------------------------------------------------------------------------------------

_COMMON_WORDS = (  # noqa: SIM905 - a word list reads better as prose
    "the and for with this that you are was not but can how what when should have from they "
    "will use run our all one out new get set add make also any into only then than been more "
    "must need after before each every other when where which while about again always never "
    "because still just like some them there these those very would could first last next "
    "team code test file files change changes time data user users service services check"
).split()


def _vocabulary(corpus: Sequence[EvalDoc]) -> tuple[list[str], list[float], list[str]]:
    """Latin words with Zipf weights, and Chinese words, drawn from the evaluation corpus."""
    import regex

    from cairn.memory.store.tokenizer import tokenize

    counts: dict[str, int] = {}
    chinese: list[str] = []
    for doc in corpus:
        text = f"{doc.name} {doc.description} {doc.body}"
        for token in tokenize(text):
            if token.isascii():
                counts[token] = counts.get(token, 0) + 1
        chinese.extend(regex.findall(r"\p{Han}{2,4}", text))
    ranked = [*dict.fromkeys(_COMMON_WORDS)]
    ranked += [
        word for word, _ in sorted(counts.items(), key=lambda kv: -kv[1]) if word not in ranked
    ]
    # Fill out a long tail so large pools do not reuse a few hundred words.
    rng = random.Random(11)
    tail = ["".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(3))
            for _ in range(6000)]  # fmt: skip
    ranked += tail
    weights = [1.0 / (rank + 3) ** 1.07 for rank in range(len(ranked))]
    return ranked, weights, chinese or ["测试数据"]


class PoolGenerator:
    """Memory files that look like a large real store: Zipf-distributed words, 15% Chinese."""

    TYPES = ("user", "feedback", "project", "reference")

    def __init__(self, corpus: Sequence[EvalDoc], seed: int) -> None:
        self.words, weights, self.chinese = _vocabulary(corpus)
        self.cumulative = list(_accumulate(weights))
        self.rng = random.Random(seed)

    def _latin(self, count: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cumulative, k=count))

    def _han(self, count: int) -> str:
        return "".join(self.rng.choices(self.chinese, k=count))

    def doc(self, number: int) -> tuple[str, str, str, str, str]:
        rng = self.rng
        memory_type = self.TYPES[number % 4]
        if rng.random() < 0.15:
            name, description = self._han(rng.randint(2, 4)), self._han(rng.randint(5, 12))
            body = "。".join(self._han(rng.randint(4, 10)) for _ in range(rng.randint(3, 8)))
        else:
            name = self._latin(rng.randint(3, 7)).capitalize()
            description = self._latin(rng.randint(8, 20))
            sentences = [
                self._latin(rng.randint(6, 16)).capitalize() + "."
                for _ in range(rng.randint(3, 12))
            ]
            body = " ".join(sentences) + f"\n\nWhy: {self._latin(rng.randint(5, 12))}.\n"
            body += f"How to apply: {self._latin(rng.randint(5, 12))}."
        relative = f"{memory_type}/synthetic-{number:06d}.md"
        return relative, memory_type, name, description, body


def _accumulate(values: Iterable[float]) -> Iterable[float]:
    total = 0.0
    for value in values:
        total += value
        yield total


def build_tree(size: int, corpus: Sequence[EvalDoc], base: Path) -> Any:
    """A pool of ``size`` memory files: the evaluation corpus plus synthetic ones (cached)."""
    from cairn.memory.paths import MemoryRoots
    from cairn.memory.store.parse import render_memory_file

    folder = base / f"pool-{size}-v{TREE_VERSION}"
    roots = MemoryRoots(
        project=folder / "project-memory", user=folder / "user-memory", state_dir=folder / "state"
    )
    marker = folder / "complete"
    if marker.exists():
        return roots
    real = list(corpus)[: min(len(corpus), size)]
    materialize_into(real, roots)
    generator = PoolGenerator(corpus, seed=size)
    for number in range(size - len(real)):
        relative, memory_type, name, description, body = generator.doc(number)
        root = roots.project if number % 5 else roots.user  # 80% project, 20% user
        assert root is not None
        mtime = NOW - generator.rng.uniform(0, 400) * DAY
        text = render_memory_file(name, description, cast("MemoryType", memory_type), body)
        write_doc(root, relative, text, mtime)
    marker.write_text("ok\n")
    return roots


# --------------------------------------------------------------------------------------------
# Speed
# --------------------------------------------------------------------------------------------


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[index]


def _ms(samples: Sequence[float]) -> str:
    return f"{percentile(samples, 0.5):.2f} / {percentile(samples, 0.95):.2f}"


@dataclass
class Samples:
    """Wall-clock and CPU milliseconds of repeated runs. On a shared machine the wall p95
    picks up time spent descheduled; the CPU p95 is what the code itself costs."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def text(self) -> str:
        return f"{_ms(self.wall)} (cpu p95 {percentile(self.cpu, 0.95):.2f})"


def _edit_one(roots: Any, rng: random.Random, revision: int) -> None:
    """Edit one memory in place, as another process would (no rename: the folder is unchanged)."""
    folder = roots.project / "feedback"
    names = sorted(name for name in os.listdir(folder) if name.endswith(".md"))
    with open(folder / rng.choice(names), "a", encoding="utf-8") as handle:
        handle.write(f"\nEdited by another process, revision {revision}.\n")


@dataclass
class ReferenceScanner:
    """The reference's warm scan: stat every file, re-parse those whose stat changed (its
    newest parse cache), then order project docs first, each by mtime, file name, path."""

    roots: Any
    cache: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def scan(self) -> list[Any]:
        from cairn.memory.document import MemoryDoc
        from cairn.memory.store.parse import parse_memory_file
        from cairn.memory.store.scan import walk_root

        docs: list[Any] = []
        scopes: tuple[tuple[MemoryScope, Path], ...] = (
            ("project", self.roots.project),
            ("user", self.roots.user),
        )
        for scope, root in scopes:
            walk = walk_root(str(root))
            for relative, key in walk.keys.items():
                cached = self.cache.get(f"{scope}:{relative}")
                if cached is None or cached[0] != key:
                    info = walk.infos[relative]
                    parsed = parse_memory_file(root / relative, root, scope, info=info)
                    if not isinstance(parsed, MemoryDoc):
                        continue
                    cached = self.cache[f"{scope}:{relative}"] = (key, parsed)
                docs.append(cached[1])
        docs.sort(key=lambda doc: (doc.scope != "project", -doc.mtime, doc.path.name,
                                   doc.relative_path))  # fmt: skip
        return docs

    def fast_phase(self, query: str) -> str:
        return _render(reference_rank(query, self.scan(), FAST_DOCS), NOW)


@dataclass
class SpeedRow:
    size: int
    figures: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ColdRun:
    imports_ms: float  # importing the memory store (pulls in cairn.config and pydantic today)
    first_result_ms: float  # store opened -> refreshed -> top 2 ranked and rendered
    first_result_cpu_ms: float  # the same, in CPU time
    wall_ms: float  # the whole subprocess, interpreter start-up included


def _run_cold(roots: Any, cache_dir: Path, query: str, save: bool) -> ColdRun:
    spec = {"project": str(roots.project), "user": str(roots.user), "state": str(roots.state_dir),
            "cache": str(cache_dir), "query": query, "save": save}  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--cold-probe", json.dumps(spec)],
        capture_output=True, text=True, check=True, cwd=HERE.parent,
    )  # fmt: skip
    wall = (time.perf_counter() - started) * 1000
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    return ColdRun(
        probe["imports_ms"], probe["first_result_ms"], probe["first_result_cpu_ms"], wall
    )


def cold_probe(spec_text: str) -> None:
    """Run in a fresh process: open the store, refresh, rank, render the top 2; print timings."""
    spec = json.loads(spec_text)
    before_imports = time.perf_counter()
    from cairn.memory.paths import MemoryRoots
    from cairn.memory.recall.render import render_relevant_memory
    from cairn.memory.store.memory_store import MemoryStore

    opened, cpu = time.perf_counter(), time.process_time()
    roots = MemoryRoots(Path(spec["project"]), Path(spec["user"]), Path(spec["state"]))
    store = MemoryStore(roots, cache_dir=Path(spec["cache"]))
    store.refresh()
    top = store.rank(spec["query"], limit=FAST_DOCS)
    render_relevant_memory([hit.doc for hit in top], now=NOW)
    first = (time.perf_counter() - opened) * 1000
    first_cpu = (time.process_time() - cpu) * 1000
    if spec["save"]:
        store.save()
    imports = (opened - before_imports) * 1000
    print(json.dumps({"first_result_ms": first, "first_result_cpu_ms": first_cpu,
                      "imports_ms": imports, "hits": len(top)}))  # fmt: skip


def _cold_figures(row: SpeedRow, label: str, runs: Sequence[ColdRun]) -> None:
    samples = Samples(
        [run.first_result_ms for run in runs], [run.first_result_cpu_ms for run in runs]
    )
    row.figures[f"{label}: store open to first result ms p50/p95"] = samples.text()
    row.figures[f"{label}: imports / process wall ms p50"] = (
        f"{percentile([run.imports_ms for run in runs], 0.5):.0f} / "
        f"{percentile([run.wall_ms for run in runs], 0.5):.0f}"
    )


def _clear(folder: Path) -> None:
    if folder.exists():
        for child in folder.iterdir():
            child.unlink()


def _time_each(action: Callable[[str], Any], queries: Sequence[str], repeats: int = 3) -> Samples:
    samples = Samples()
    for _ in range(repeats):
        for query in queries:
            started, cpu = time.perf_counter_ns(), time.process_time_ns()
            action(query)
            samples.cpu.append((time.process_time_ns() - cpu) / 1e6)
            samples.wall.append((time.perf_counter_ns() - started) / 1e6)
    return samples


def _fast_phase(store: Any, query: str) -> str:
    """What a turn pays before its first model request: refresh, rank the top 2, render."""
    store.refresh()
    return _render([hit.doc for hit in store.rank(query, limit=FAST_DOCS)], NOW)


def _time_to_fast_result(store: Any, queries: Sequence[str], repeats: int = 3) -> Samples:
    """``recall_memories`` from its call to ``on_fast_result``: what a turn's first request
    waits for (refresh, rank, render, plus whatever recall does before publishing)."""
    import asyncio

    from cairn.abort import AbortController
    from cairn.memory.recall.query import recall_memories

    samples = Samples()

    async def one(query: str) -> None:
        marks: list[tuple[int, int]] = []
        started, cpu = time.perf_counter_ns(), time.process_time_ns()
        await recall_memories(
            store, query, provider=None, excluded=frozenset(), recent_tools=(),
            abort=AbortController().signal, now=lambda: NOW,
            on_fast_result=lambda _r: marks.append(
                (time.perf_counter_ns(), time.process_time_ns())
            ),
        )  # fmt: skip
        if marks:
            samples.wall.append((marks[0][0] - started) / 1e6)
            samples.cpu.append((marks[0][1] - cpu) / 1e6)

    async def run_all() -> None:
        for _ in range(repeats):
            for query in queries:
                await one(query)

    asyncio.run(run_all())
    return samples


def _phase_with_edits(
    store: Any, roots: Any, queries: Sequence[str], seed: int
) -> tuple[Samples, list[float]]:
    """The fast phase right after another process edited one memory in place."""
    rng = random.Random(seed)
    phase = Samples()
    reindex: list[float] = []
    for revision, query in enumerate(queries):
        _edit_one(roots, rng, revision)
        started, cpu = time.perf_counter_ns(), time.process_time_ns()
        report = store.refresh()
        _render([hit.doc for hit in store.rank(query, limit=FAST_DOCS)], NOW)
        phase.cpu.append((time.process_time_ns() - cpu) / 1e6)
        phase.wall.append((time.perf_counter_ns() - started) / 1e6)
        if report.reparsed < 1:
            raise SystemExit("the edit was not noticed")
        reindex.append(report.reindex_ms)
    return phase, reindex


def _measure_cold(
    row: SpeedRow, roots: Any, cache_dir: Path, queries: Sequence[str], runs: int
) -> None:
    """New processes: without an index (parse everything, then save), then with it."""
    no_index: list[ColdRun] = []
    for _ in range(1 if row.size >= 10_000 else 3):
        _clear(cache_dir)
        no_index.append(_run_cold(roots, cache_dir, queries[0], save=True))
    _cold_figures(row, "cold, no index", no_index)
    with_index = [_run_cold(roots, cache_dir, queries[i % len(queries)], save=False)
                  for i in range(runs)]  # fmt: skip
    _cold_figures(row, "cold, persisted index", with_index)


def _measure_warm(row: SpeedRow, roots: Any, cache_dir: Path, queries: Sequence[str]) -> Any:
    from cairn.memory.store.memory_store import MemoryStore

    store = MemoryStore(roots, cache_dir=cache_dir)
    store.refresh()
    for query in queries:  # one pass first: posting lists cut out, frequent terms packed
        store.rank(query, limit=MAX_CANDIDATES - RECENT_RESERVE)
    row.figures["rank top 2 ms p50/p95"] = _time_each(
        lambda query: store.rank(query, limit=FAST_DOCS), queries
    ).text()
    row.figures["rank top 180 ms p50/p95"] = _time_each(
        lambda query: store.rank(query, limit=MAX_CANDIDATES - RECENT_RESERVE), queries
    ).text()
    row.figures["warm fast phase ms p50/p95 (nothing changed)"] = _time_each(
        lambda query: _fast_phase(store, query), queries
    ).text()
    row.figures["recall_memories call to fast result ms p50/p95"] = _time_to_fast_result(
        store, queries
    ).text()
    phase, reindex = _phase_with_edits(store, roots, queries, seed=row.size)
    row.figures["warm fast phase ms p50/p95 (one file edited in place)"] = phase.text()
    row.figures["re-index one changed file ms p50/p95"] = _ms(reindex)
    return store


def _measure_polling(row: SpeedRow, roots: Any, work: Path, queries: Sequence[str]) -> None:
    from cairn.memory.store.memory_store import MemoryStore

    polling = MemoryStore(roots, cache_dir=work / f"cache-{row.size}-poll", watch=False)
    polling.refresh()
    row.figures["warm fast phase, no inotify (full stat walk) ms p50/p95"] = _time_each(
        lambda query: _fast_phase(polling, query), queries
    ).text()
    polling.close()


def _measure_reference(row: SpeedRow, roots: Any, store: Any, queries: Sequence[str]) -> None:
    scanner = ReferenceScanner(roots)
    scanner.scan()  # its parse cache warm, like ours
    pool = store.docs()
    row.figures["reference rule: rank ms p50/p95"] = _time_each(
        lambda query: reference_rank(query, pool, FAST_DOCS), queries
    ).text()
    row.figures["reference rule: warm fast phase ms p50/p95"] = _time_each(
        scanner.fast_phase, queries
    ).text()


def speed_main(sizes: Sequence[int], work: Path, slow_queries: int, cold_runs: int) -> None:
    corpus = load_corpus()
    queries = [case.query for case in load_cases(corpus)]
    rows: list[SpeedRow] = []
    for size in sizes:
        started = time.perf_counter()
        roots = build_tree(size, corpus, work)
        print(f"[{size} files] tree ready in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        row = SpeedRow(size)
        cache_dir = work / f"cache-{size}"
        _measure_cold(row, roots, cache_dir, queries, cold_runs)
        store = _measure_warm(row, roots, cache_dir, queries)
        few = queries[:slow_queries] if size >= 10_000 else queries  # the slow ones, at scale
        _measure_polling(row, roots, work, few)
        _measure_reference(row, roots, store, few)
        store.close()
        rows.append(row)
        print(f"[{size} files] done", file=sys.stderr)
    print_speed(rows)


def print_speed(rows: Sequence[SpeedRow]) -> None:
    print("\n## Speed (ms; p50 / p95)\n")
    labels = list(rows[0].figures)
    print("| measure | " + " | ".join(f"{row.size:,} files" for row in rows) + " |")
    print("|" + "---|" * (len(rows) + 1))
    for label in labels:
        print(f"| {label} | " + " | ".join(row.figures.get(label, "") for row in rows) + " |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quality", action="store_true", help="quality tables only")
    parser.add_argument("--speed", action="store_true", help="speed tables only")
    parser.add_argument("--sizes", default="100,1000,10000,50000")
    parser.add_argument("--misses", action="store_true", help="list fast-phase misses")
    parser.add_argument("--tune", action="store_true", help="the dev-split parameter search")
    parser.add_argument(
        "--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "cairn-recall-bench")
    )
    parser.add_argument(
        "--slow-queries",
        type=int,
        default=20,
        help="queries timed for the slow variants (reference rule, polling) at >= 10,000 files",
    )
    parser.add_argument("--cold-runs", type=int, default=7, help="new processes per size")
    parser.add_argument("--cold-probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cold_probe:
        cold_probe(args.cold_probe)
        return
    if args.tune:
        tune_main()
        return
    both = not args.quality and not args.speed
    if args.quality or both:
        quality_main(args.misses)
    if args.speed or both:
        sizes = [int(size) for size in args.sizes.split(",") if size]
        speed_main(sizes, Path(args.work), args.slow_queries, args.cold_runs)


if __name__ == "__main__":
    main()
