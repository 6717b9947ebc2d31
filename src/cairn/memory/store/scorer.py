"""The fast phase's relevance formula: a field-weighted BM25 (BM25F) over title, description, body.

For a document ``d`` and a query term ``t``::

    tf~(t, d)  = sum over fields f of  w_f * tf_f(t, d) / (1 - b_f + b_f * len_f(d) / L_f)
    weight     = tf~ / (k1 + tf~)                        # saturated, in (0, 1)
    score(d)   = sum over query terms of  idf(t) * weight(t, d)
    idf(t)     = ln(1 + (N - df + 0.5) / (df + 0.5))     # N docs in the pool, df docs holding t

Both factors are stored as small integers (weight * 255 rounded, at least 1; idf * 16 rounded,
at least 1), so a score is an exact integer: equal documents tie exactly, whatever order they
were indexed in, and the index can add scores with integer arithmetic (see lexical_index).

Unlike textbook BM25, the length of a field is normalised against a fixed reference length
``L_f`` rather than the pool's running average, so a document's weights depend on that document
alone: an edited file re-indexes only itself, and an index updated file by file ranks exactly like
one rebuilt from scratch. Only ``idf`` depends on the pool, and it is computed at query time from
exact integer counts. The whole body is scored (the prompt still shows at most 1,200 characters).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from cairn.memory.store.tokenizer import TOKENIZER_VERSION, term_counts
from cairn.values import Value

__all__ = [
    "DEFAULT_SCORER",
    "IDF_SCALE",
    "MAX_TERM_WEIGHT",
    "ScorerConfig",
    "idf",
    "idf_weight",
    "score_value",
    "term_weights",
]

MAX_TERM_WEIGHT = 255  # a saturated term weight in (0, 1) is stored as 1..255
IDF_SCALE = 16  # an idf is stored as round(idf * 16), at least 1


class ScorerConfig(Value):
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

    def parameters(self) -> list[tuple[str, float]]:
        """``(name, value)`` of every parameter, by name."""
        return sorted((name, getattr(self, name)) for name in type(self).__value_fields__)

    def fingerprint(self) -> str:
        """Changes whenever stored weights would: a persisted index with another one is rebuilt."""
        text = repr((TOKENIZER_VERSION, self.parameters()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


DEFAULT_SCORER = ScorerConfig()


def idf(doc_frequency: int, doc_count: int) -> float:
    """Inverse document frequency; positive for every term that occurs at all."""
    return math.log(1.0 + (doc_count - doc_frequency + 0.5) / (doc_frequency + 0.5))


def idf_weight(doc_frequency: int, doc_count: int) -> int:
    """:func:`idf` as the integer factor scores are built from."""
    return max(1, round(idf(doc_frequency, doc_count) * IDF_SCALE))


def score_value(points: int) -> float:
    """An integer score as a float on the BM25 scale (for display and comparison only)."""
    return points / (MAX_TERM_WEIGHT * IDF_SCALE)


def _field_factor(weight: float, b: float, length: int, reference: float) -> float:
    return weight / (1.0 - b + b * length / reference)


def term_weights(
    title: str, description: str, body: str, config: ScorerConfig = DEFAULT_SCORER
) -> dict[str, int]:
    """Every term of a document with its saturated BM25F weight, as an integer 1..255."""
    fields: Sequence[tuple[str, float, float, float]] = (
        (title, config.title_weight, config.title_b, config.title_length),
        (description, config.description_weight, config.description_b,
         config.description_length),
        (body, config.body_weight, config.body_b, config.body_length),
    )  # fmt: skip
    pseudo: dict[str, float] = {}
    for text, weight, b, reference in fields:
        counts = term_counts(text)
        if not counts:
            continue
        factor = _field_factor(weight, b, sum(counts.values()), reference)
        if not pseudo:
            pseudo = {term: factor * count for term, count in counts.items()}
            continue
        added = {term: factor * count for term, count in counts.items()}
        for term in pseudo.keys() & added.keys():  # the same sums, in the same order, as adding
            added[term] = pseudo[term] + added[term]  # field by field from 0.0
        pseudo |= added
    top, k1 = MAX_TERM_WEIGHT, config.k1
    return {term: round(top * tf / (k1 + tf)) or 1 for term, tf in pseudo.items()}
