"""Recall's tokenizer: the reference system's rules, so the same query finds the same words.

Text is NFKC-normalised and lower-cased. A token is then either

- a code-point bigram of a CJK run (Han, Hiragana, Katakana including the prolonged sound mark
  ``ー`` through Script_Extensions, Hangul); a lone CJK character yields nothing, or
- a whole run of at least two letters, marks or digits that starts with a letter or digit and
  holds no CJK character (``abc漢字`` gives ``abc`` and the CJK run ``漢字``), unless it is an
  English stop word (:data:`STOP_WORDS`: "the", "should", "to", ...), reduced to its English
  Snowball stem (``indentation`` and ``indents`` both give ``indent``; PyStemmer, the Snowball
  project's C stemmer). CJK runs are neither stemmed nor filtered.

The reference system matches surface words of three characters or more only; stemming and stop
words are cairn's (issue #26): "indent" finds "indentation", and function words no longer add to
every score. So are two-character words: "uv", "db", "CI", "PR", "go" and "js" are often the
words that say what a memory is about, and the reference drops them (the English two-letter
stop words, "to", "of", "is", ..., and the contractions' "re", "ll", "ve" are dropped instead).
:func:`surface_tokens` keeps the reference's rule for the benchmarks' baseline.

Queries are bounded to :data:`MAX_QUERY_TOKENS` distinct tokens: the first 32 distinct ones plus
the last 32 distinct ones (an LRU tail), so a long query keeps both of its ends.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import regex

__all__ = [
    "MAX_QUERY_TOKENS",
    "QUERY_HEAD_TOKENS",
    "STOP_WORDS",
    "TOKENIZER_VERSION",
    "load_pattern",
    "load_stemmer",
    "normalize",
    "query_tokens",
    "surface_tokens",
    "term_counts",
    "tokenize",
    "words",
]

MAX_QUERY_TOKENS = 64  # distinct query tokens kept (the reference's MAX_HEURISTIC_QUERY_TOKENS)
QUERY_HEAD_TOKENS = 32  # of which the first distinct ones; the rest is the LRU tail
TOKENIZER_VERSION = 3  # bump when tokens change: persisted indexes are then rebuilt

# Snowball's English stop word list (snowballstem.org), the words of two or more letters (a
# letter alone is never a token), apostrophes dropped as the token pattern splits there (so
# "you're", "we'll", "I've" leave "re", "ll" and "ve").
_STOP_WORD_TEXT = """
    am an as at be by do he if in is it ll me my no of on or re so to up ve we
    about above after again against all and any are aren because been before being below between
    both but can cannot could couldn did didn does doesn doing don down during each few for
    from further had hadn has hasn have haven having her here hers herself him himself his how
    into isn its itself let more most mustn myself nor not off once only other ought our ours
    ourselves out over own same shan she should shouldn some such than that the their theirs
    them themselves then there these they this those through too under until very was wasn
    were weren what when where which while who whom why will with won would wouldn you your
    yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())

_CJK = r"\p{Script=Han}\p{Script=Hiragana}\p{Script_Extensions=Katakana}\p{Script=Hangul}"


@functools.cache
def _token_run(shortest: int = 2) -> regex.Pattern[str]:
    """Group 1: a CJK run; group 2: a non-CJK run of >= ``shortest`` letters/marks/digits
    starting with L or N. Compiled on first use: ``regex`` costs ~15 ms to import (~50 M
    instructions), which only non-ASCII text needs (:func:`_runs`)."""
    import regex

    rest = f"{{{shortest - 1},}}"
    return regex.compile(
        rf"(?V1)([{_CJK}]+)|([[\p{{L}}\p{{N}}]--[{_CJK}]][[\p{{L}}\p{{M}}\p{{N}}]--[{_CJK}]]{rest})"
    )


@functools.cache
def _stem() -> Callable[[str], str]:
    """The English Snowball stemmer's ``stemWord``. Loaded on first use, like the pattern: a
    session whose memory store is empty never needs it."""
    import Stemmer

    return Stemmer.Stemmer("english").stemWord


def load_pattern() -> None:
    """Compile the token pattern now (it imports ``regex``), which non-ASCII text needs, e.g.
    before a fresh machine's first database search."""
    _token_run()


def load_stemmer() -> None:
    """Load the stemmer now, which every indexed or queried word needs (a store warming up
    before the first prompt); the pattern waits for the first non-ASCII text."""
    _stem()


def normalize(text: str) -> str:
    """NFKC, then lower case (full-width ``ＡＢＣ`` becomes ``abc``)."""
    return unicodedata.normalize("NFKC", text).lower()


def tokenize(text: str) -> list[str]:
    """Every token of ``text`` in order, repeats included (term frequencies count them).

    The one tokenizer of the index and of queries: stop words dropped, words stemmed."""
    return _tokens(text, _stem())


def surface_tokens(text: str) -> list[str]:
    """The reference system's tokens: words of three characters or more as written, stop words
    kept (benchmark baselines)."""
    return _tokens(text, None, _REFERENCE_SHORTEST)


def words(text: str) -> list[str]:
    """:func:`tokenize`'s words before stemming, stop words kept (a database's own full-text
    search stems and filters them)."""
    return _tokens(text, None)


_STEMS: dict[str, str] = {}  # word -> stem, remembered (a dict lookup beats the C call)
_MAX_STEMS = 200_000  # words remembered at most (then the memo starts over)


def _runs(text: str, shortest: int = 2) -> list[tuple[str, str]]:
    """(CJK run, other word) for each token run of ``text``, in order; words of ``shortest``
    characters or more. ASCII text (most queries and memories) skips ``regex``: NFKC leaves
    ASCII as it is, and there the token pattern is exactly ``[a-z0-9]{2,}`` after lower-casing
    (see :func:`term_counts`)."""
    if text.isascii():
        ascii_word = _ASCII_WORD if shortest == 2 else _REFERENCE_ASCII_WORD
        return [("", word) for word in ascii_word.findall(text.lower())]
    return _pattern_runs(text, shortest)


def _pattern_runs(text: str, shortest: int = 2) -> list[tuple[str, str]]:
    """:func:`_runs` by the token pattern itself, for any text."""
    runs: list[tuple[str, str]] = _token_run(shortest).findall(normalize(text))
    return runs


def _tokens(text: str, stem: Callable[[str], str] | None, shortest: int = 2) -> list[str]:
    tokens: list[str] = []
    append = tokens.append
    stems = _STEMS
    for cjk_run, word in _runs(text, shortest):
        if not word:
            tokens.extend(cjk_run[i : i + 2] for i in range(len(cjk_run) - 1))
        elif stem is None:
            append(word)
        elif word not in STOP_WORDS:
            stemmed = stems.get(word)
            if stemmed is None:
                if len(stems) >= _MAX_STEMS:
                    stems.clear()
                stemmed = stems[word] = stem(word)
            append(stemmed)
    return tokens


_ASCII_WORD = re.compile(r"[a-z0-9]{2,}")  # the token pattern on lower-cased ASCII text
_REFERENCE_SHORTEST = 3  # the reference system's shortest word (:func:`surface_tokens`)
_REFERENCE_ASCII_WORD = re.compile(r"[a-z0-9]{3,}")
_TERMS: dict[str, str] = {}  # ASCII word (not a stop word) -> its stem (remembered)


def term_counts(text: str) -> dict[str, int]:
    """How often each token of ``text`` occurs: ``Counter(tokenize(text))``, cheaper.

    Indexing every memory of a large folder spends most of its time here. ASCII text (most
    memories) skips the Unicode machinery: NFKC leaves ASCII as it is, and there the token
    pattern is exactly ``[a-z0-9]{2,}`` after lower-casing (no CJK, no marks, no other letters
    or digits); words are counted, stop words dropped and stems looked up in C-level loops, each
    distinct word stemmed once per process."""
    if not text.isascii():
        return dict(Counter(tokenize(text)))
    words = Counter(_ASCII_WORD.findall(text.lower()))
    for stop_word in STOP_WORDS.intersection(words):
        del words[stop_word]
    known = _TERMS
    unknown = set(words).difference(known)  # (iterates the words, not every known one)
    if unknown:
        if len(known) + len(unknown) > _MAX_STEMS:
            known.clear()
            unknown = set(words)
        stem = _stem()
        for word in unknown:
            known[word] = stem(word)
    terms = list(map(known.__getitem__, words))
    counts = dict(zip(terms, words.values(), strict=True))
    if len(counts) < len(terms):  # words sharing a stem ("test", "tests"): add them up
        counts = {}
        for term, count in zip(terms, words.values(), strict=True):
            counts[term] = counts.get(term, 0) + count
    return counts


def query_tokens(text: str, split: Callable[[str], list[str]] = tokenize) -> list[str]:
    """The distinct tokens of a query, at most 64: the first 32 plus an LRU tail of 32."""
    head: dict[str, None] = {}
    tail: OrderedDict[str, None] = OrderedDict()
    tail_size = MAX_QUERY_TOKENS - QUERY_HEAD_TOKENS
    for token in split(text):
        if token in head:
            continue
        if len(head) < QUERY_HEAD_TOKENS:
            head[token] = None
        elif token in tail:
            tail.move_to_end(token)
        else:
            tail[token] = None
            if len(tail) > tail_size:
                tail.popitem(last=False)
    return [*head, *tail]
