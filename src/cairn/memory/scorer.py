"""The fast phase's relevance formula: a field-weighted BM25 (BM25F) over title, description, body.

For a document ``d`` and a query term ``t``::

    tf~(t, d)  = sum over fields f of  w_f * tf_f(t, d) / (1 - b_f + b_f * len_f(d) / L_f)
    weight     = tf~ / (k1 + tf~)                        # saturated, in [0, 1)
    score(d)   = sum over query terms of  idf(t) * weight(t, d)
    idf(t)     = ln(1 + (N - df + 0.5) / (df + 0.5))     # N docs in the pool, df docs holding t

Unlike textbook BM25, the length of a field is normalised against a fixed reference length
``L_f`` rather than the pool's running average, so a document's weights depend on that document
alone: an edited file re-indexes only itself, and an index updated file by file ranks exactly like
one rebuilt from scratch. Only ``idf`` depends on the pool, and it is computed at query time from
exact integer counts. The whole body is scored (the prompt still shows at most 1,200 characters).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from cairn.memory.document import MemoryType
from cairn.memory.tokenizer import TOKENIZER_VERSION, tokenize

__all__ = [
    "DEFAULT_SCORER",
    "TYPE_BONUS_CAP",
    "TYPE_KEYWORDS",
    "ScorerConfig",
    "idf",
    "term_weights",
    "type_keyword_hits",
]

# Query words that hint at a memory type (the reference's type-keyword bonus).
TYPE_KEYWORDS: dict[MemoryType, frozenset[str]] = {
    "user": frozenset({"user", "preference", "preferences", "background", "role", "terse"}),
    "feedback": frozenset({"feedback", "rule", "rules", "avoid", "style", "summary"}),
    "project": frozenset({"project", "goal", "goals", "incident", "deadline", "release"}),
    "reference": frozenset({"reference", "dashboard", "ticket", "docs", "doc", "link"}),
}
TYPE_BONUS_CAP = 2  # type keywords counted per document, at most (reference)


@dataclass(frozen=True)
class ScorerConfig:
    """BM25F parameters. Defaults were chosen on the dev half of the evaluation set."""

    title_weight: float = 4.0  # the reference's 4 / 3 / 1 field weights also won on dev
    description_weight: float = 3.0
    body_weight: float = 1.0
    k1: float = 1.2  # term-frequency saturation
    title_b: float = 0.0  # length normalisation strength per field (titles: none)
    description_b: float = 0.5
    body_b: float = 0.75
    title_length: float = 6.0  # reference field lengths in tokens (see the module docstring)
    description_length: float = 14.0
    body_length: float = 80.0
    type_bonus: float = 0.0  # score per matching type keyword; 0 turns the bonus off

    def fingerprint(self) -> str:
        """Changes whenever stored weights would: a persisted index with another one is rebuilt."""
        text = repr((TOKENIZER_VERSION, sorted(asdict(self).items())))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


DEFAULT_SCORER = ScorerConfig()


def idf(doc_frequency: int, doc_count: int) -> float:
    """Inverse document frequency; positive for every term that occurs at all."""
    return math.log(1.0 + (doc_count - doc_frequency + 0.5) / (doc_frequency + 0.5))


def _field_factor(weight: float, b: float, length: int, reference: float) -> float:
    return weight / (1.0 - b + b * length / reference)


def term_weights(
    title: str, description: str, body: str, config: ScorerConfig = DEFAULT_SCORER
) -> dict[str, float]:
    """Every term of a document with its saturated BM25F weight (0 < weight < 1)."""
    fields: Sequence[tuple[list[str], float, float, float]] = (
        (tokenize(title), config.title_weight, config.title_b, config.title_length),
        (tokenize(description), config.description_weight, config.description_b,
         config.description_length),
        (tokenize(body), config.body_weight, config.body_b, config.body_length),
    )  # fmt: skip
    pseudo: dict[str, float] = {}
    for tokens, weight, b, reference in fields:
        factor = _field_factor(weight, b, len(tokens), reference)
        for term, count in Counter(tokens).items():
            pseudo[term] = pseudo.get(term, 0.0) + factor * count
    return {term: tf / (config.k1 + tf) for term, tf in pseudo.items()}


def type_keyword_hits(query_terms: Iterable[str], memory_type: MemoryType) -> int:
    """How many query terms hint at ``memory_type``, at most :data:`TYPE_BONUS_CAP`."""
    keywords = TYPE_KEYWORDS[memory_type]
    return min(sum(1 for term in query_terms if term in keywords), TYPE_BONUS_CAP)
