"""Recall's tokenizer: the reference system's rules, so the same query finds the same words.

Text is NFKC-normalised and lower-cased. A token is then either

- a code-point bigram of a CJK run (Han, Hiragana, Katakana including the prolonged sound mark
  ``ー`` through Script_Extensions, Hangul); a lone CJK character yields nothing, or
- a whole run of at least three letters, marks or digits that starts with a letter or digit and
  holds no CJK character (``abc漢字`` gives ``abc`` and the CJK run ``漢字``).

Queries are bounded to :data:`MAX_QUERY_TOKENS` distinct tokens: the first 32 distinct ones plus
the last 32 distinct ones (an LRU tail), so a long query keeps both of its ends.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import regex

__all__ = [
    "MAX_QUERY_TOKENS",
    "QUERY_HEAD_TOKENS",
    "TOKENIZER_VERSION",
    "load",
    "normalize",
    "query_tokens",
    "tokenize",
]

MAX_QUERY_TOKENS = 64  # distinct query tokens kept (the reference's MAX_HEURISTIC_QUERY_TOKENS)
QUERY_HEAD_TOKENS = 32  # of which the first distinct ones; the rest is the LRU tail
TOKENIZER_VERSION = 1  # bump when tokens change: persisted indexes are then rebuilt

_CJK = r"\p{Script=Han}\p{Script=Hiragana}\p{Script_Extensions=Katakana}\p{Script=Hangul}"


@functools.cache
def _token_run() -> regex.Pattern[str]:
    """Group 1: a CJK run; group 2: a non-CJK run of >= 3 letters/marks/digits starting with L
    or N. Compiled on first use: ``regex`` costs ~15 ms to import, which a session whose
    memory store is empty never needs."""
    import regex

    return regex.compile(
        rf"(?V1)([{_CJK}]+)|([[\p{{L}}\p{{N}}]--[{_CJK}]][[\p{{L}}\p{{M}}\p{{N}}]--[{_CJK}]]{{2,}})"
    )


def load() -> None:
    """Compile the tokenizer now (it imports ``regex``), e.g. while the user types a prompt."""
    _token_run()


def normalize(text: str) -> str:
    """NFKC, then lower case (full-width ``ＡＢＣ`` becomes ``abc``)."""
    return unicodedata.normalize("NFKC", text).lower()


def tokenize(text: str) -> list[str]:
    """Every token of ``text`` in order, repeats included (term frequencies count them)."""
    tokens: list[str] = []
    for cjk_run, word in _token_run().findall(normalize(text)):
        if word:
            tokens.append(word)
        else:
            tokens.extend(cjk_run[i : i + 2] for i in range(len(cjk_run) - 1))
    return tokens


def query_tokens(text: str) -> list[str]:
    """The distinct tokens of a query, at most 64: the first 32 plus an LRU tail of 32."""
    head: dict[str, None] = {}
    tail: OrderedDict[str, None] = OrderedDict()
    tail_size = MAX_QUERY_TOKENS - QUERY_HEAD_TOKENS
    for token in tokenize(text):
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
