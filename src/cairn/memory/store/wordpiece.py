"""BERT's uncased WordPiece tokenizer, as all-MiniLM-L6-v2 was trained with it.

The same ids as Hugging Face's ``tokenizers`` gives for the model's ``tokenizer.json``
(BertNormalizer, BertPreTokenizer, WordPiece; tests/memory/store/test_wordpiece.py compares
the two on any text), in plain Python, so the semantic extra needs no tokenizer library:

1. normalise: drop NUL, U+FFFD and control characters (tab, newline and carriage return are
   whitespace), turn whitespace into spaces, put spaces around CJK ideographs, strip accents
   (NFD, then no non-spacing marks) and lower-case;
2. split on whitespace, and make each punctuation character a word of its own;
3. cut each word into the longest pieces found in the vocabulary, left to right, the ones after
   the first prefixed ``##``; a word that cannot be cut, or longer than 100 characters, is
   ``[UNK]``.

The categories come from Python's ``unicodedata``; the reference reads them from Unicode 9.0
tables, so the 503 code points whose Mn, P or Cc/Cf/Co class differs between the two (mostly
scripts added since, such as Soyombo) tokenize differently (listed in the test).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from pathlib import Path

__all__ = ["WordPiece", "WordPieceError"]

MAX_WORD_CHARS = 100  # a longer word is [UNK] (the model's max_input_chars_per_word)
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


class WordPieceError(ValueError):
    """The vocabulary cannot be used (no [CLS], [SEP] or [UNK] in it)."""


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _normalize(text: str) -> str:
    kept: list[str] = []
    for char in text:
        if char in "\t\n\r":
            kept.append(" ")
            continue
        if char in "\x00\ufffd" or unicodedata.category(char).startswith("C"):
            continue
        if char.isspace():
            kept.append(" ")
        elif _is_cjk(ord(char)):
            kept.append(f" {char} ")
        else:
            kept.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(kept))
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()


def _words(text: str) -> list[str]:
    words: list[str] = []
    for chunk in text.split():
        start = 0
        for index, char in enumerate(chunk):
            if _is_punctuation(char):
                if index > start:
                    words.append(chunk[start:index])
                words.append(char)
                start = index + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


class WordPiece:
    """Text to token ids: ``[CLS]``, the word pieces, ``[SEP]``."""

    def __init__(self, vocabulary: Mapping[str, int]) -> None:
        try:
            self.cls = vocabulary["[CLS]"]
            self.sep = vocabulary["[SEP]"]
            self.unk = vocabulary["[UNK]"]
        except KeyError as error:
            raise WordPieceError(f"the vocabulary has no {error} token") from error
        self._vocabulary = dict(vocabulary)
        self.size = max(self._vocabulary.values()) + 1  # ids are below this
        self._longest = max(len(piece) for piece in self._vocabulary)

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        """From a ``vocab.txt``: one piece a line, its id the line number."""
        lines = path.read_text("utf-8").splitlines()
        return cls({piece: number for number, piece in enumerate(lines) if piece})

    def encode(self, text: str, *, max_tokens: int) -> list[int]:
        """At most ``max_tokens`` ids (>= 2): ``[CLS]``, the first word pieces, ``[SEP]``."""
        room = max_tokens - 2
        ids = [self.cls]
        for word in _words(_normalize(text)):
            if len(ids) > room:
                break
            ids.extend(self._pieces(word))
        return [*ids[: room + 1], self.sep]

    def _pieces(self, word: str) -> list[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = min(len(word), start + self._longest)
            while end > start:
                piece = word[start:end] if start == 0 else f"##{word[start:end]}"
                found = self._vocabulary.get(piece)
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            if end == start:
                return [self.unk]
            start = end
        return pieces
