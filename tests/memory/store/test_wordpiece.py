"""cairn's WordPiece tokenizer gives the ids Hugging Face's ``tokenizers`` gives for
all-MiniLM-L6-v2 (the model was trained with those), on any text (issue #26)."""

from __future__ import annotations

import functools
import unicodedata
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cairn.memory.store.embedding import _package_folder
from cairn.memory.store.wordpiece import WordPiece, WordPieceError

tokenizers = pytest.importorskip("tokenizers", reason="the reference tokenizer (dev install)")

FOLDER = _package_folder()
BENCHMARK_PAIRS = Path(__file__).parents[3] / "benchmarks" / "data" / "recall_paraphrase"


@functools.cache
def _ours() -> WordPiece:
    return WordPiece.from_file(FOLDER / "vocab.txt")


@functools.cache
def _reference() -> object:
    tokenizer = tokenizers.Tokenizer.from_file(str(FOLDER / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    return tokenizer


@pytest.fixture
def ours() -> WordPiece:
    return _ours()


@pytest.fixture
def reference() -> object:
    return _reference()


def _same(ours: WordPiece, reference: object, text: str) -> None:
    assert ours.encode(text, max_tokens=256) == reference.encode(text).ids  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "text",
    [
        "how should I indent this golang source?",
        "Prefers tabs over spaces in Go files; `gofmt -w .` — naïve café, Ångström!",
        "Use `uv pip install` and keep uv.lock current (e.g. 3.11+ & <4) #tags @you 100%",
        "日本語のテキストと中文混合 with English, 한국어도",
        "\x00\x01tab\there\r\nnew\u2028line\u00a0nbsp\ufffd\u200bzero\ufeffwidth",
        "x" * 150 + " supercalifragilisticexpialidocious " + "word " * 400,
        "",
        "İstanbul ﬁnance ǅemal Ⅻ ①",
    ],
)
def test_known_texts_tokenize_as_the_reference_does(
    ours: WordPiece, reference: object, text: str
) -> None:
    _same(ours, reference, text)


def test_the_paraphrase_set_tokenizes_as_the_reference_does(
    ours: WordPiece, reference: object
) -> None:
    for name in ("pairs.yaml", "heldout.yaml"):
        for pair in yaml.safe_load((BENCHMARK_PAIRS / name).read_text("utf-8")):
            for field in ("name", "description", "body", "query"):
                _same(ours, reference, pair[field])


# The reference reads Mn (accents it strips), P* (punctuation it splits on) and Cc/Cf/Co
# (characters it drops) from the crate unicode_categories 0.1.1, whose tables are Unicode 9.0
# (2016); cairn reads them from Python's unicodedata (Unicode 14.0 in Python 3.11). These are
# exactly the code points the two databases class differently for those three rules: 497
# characters added after Unicode 9.0 (Soyombo, Zanabazar Square, Masaram Gondi, ...) and
# U+1734, U+166D, U+111C9, U+1885, U+1886, U+A9BD, whose category changed. Computed by
# comparing the crate's src/tables.rs with unicodedata 14.0.0 for every code point.
# fmt: off
_UNICODE_9_VS_14 = (
    (0x061D, 0x061D), (0x07FD, 0x07FD), (0x0890, 0x0891), (0x0898, 0x089F), (0x08CA, 0x08E2),
    (0x09FD, 0x09FE), (0x0A76, 0x0A76), (0x0AFA, 0x0AFF), (0x0B55, 0x0B55), (0x0C04, 0x0C04),
    (0x0C3C, 0x0C3C), (0x0C77, 0x0C77), (0x0C84, 0x0C84), (0x0D00, 0x0D00), (0x0D3B, 0x0D3C),
    (0x0D81, 0x0D81), (0x0EBA, 0x0EBA), (0x166D, 0x166D), (0x1734, 0x1734), (0x180F, 0x180F),
    (0x1885, 0x1886), (0x1ABF, 0x1ACE), (0x1B7D, 0x1B7E), (0x1DF6, 0x1DFB), (0x2E43, 0x2E4F),
    (0x2E52, 0x2E5D), (0xA82C, 0xA82C), (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF), (0xA9BD, 0xA9BD),
    (0x10D24, 0x10D27), (0x10EAB, 0x10EAD), (0x10F46, 0x10F50), (0x10F55, 0x10F59),
    (0x10F82, 0x10F89), (0x11070, 0x11070), (0x11073, 0x11074), (0x110C2, 0x110C2),
    (0x110CD, 0x110CD), (0x111C9, 0x111C9), (0x111CF, 0x111CF), (0x1123E, 0x1123E),
    (0x1133B, 0x1133B), (0x11438, 0x1143F), (0x11442, 0x11444), (0x11446, 0x11446),
    (0x1144B, 0x1144F), (0x1145A, 0x1145B), (0x1145D, 0x1145E), (0x11660, 0x1166C),
    (0x116B9, 0x116B9), (0x1182F, 0x11837), (0x11839, 0x1183B), (0x1193B, 0x1193C),
    (0x1193E, 0x1193E), (0x11943, 0x11946), (0x119D4, 0x119D7), (0x119DA, 0x119DB),
    (0x119E0, 0x119E0), (0x119E2, 0x119E2), (0x11A01, 0x11A0A), (0x11A33, 0x11A38),
    (0x11A3B, 0x11A47), (0x11A51, 0x11A56), (0x11A59, 0x11A5B), (0x11A8A, 0x11A96),
    (0x11A98, 0x11A9C), (0x11A9E, 0x11AA2), (0x11C30, 0x11C36), (0x11C38, 0x11C3D),
    (0x11C3F, 0x11C3F), (0x11C41, 0x11C45), (0x11C70, 0x11C71), (0x11C92, 0x11CA7),
    (0x11CAA, 0x11CB0), (0x11CB2, 0x11CB3), (0x11CB5, 0x11CB6), (0x11D31, 0x11D36),
    (0x11D3A, 0x11D3A), (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45), (0x11D47, 0x11D47),
    (0x11D90, 0x11D91), (0x11D95, 0x11D95), (0x11D97, 0x11D97), (0x11EF3, 0x11EF4),
    (0x11EF7, 0x11EF8), (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2), (0x13430, 0x13438),
    (0x16E97, 0x16E9A), (0x16F4F, 0x16F4F), (0x16FE2, 0x16FE2), (0x16FE4, 0x16FE4),
    (0x1CF00, 0x1CF2D), (0x1CF30, 0x1CF46), (0x1E000, 0x1E006), (0x1E008, 0x1E018),
    (0x1E01B, 0x1E021), (0x1E023, 0x1E024), (0x1E026, 0x1E02A), (0x1E130, 0x1E136),
    (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E944, 0x1E94A), (0x1E95E, 0x1E95F),
)
# fmt: on
_SAME_IN_BOTH_DATABASES = st.characters(blacklist_categories=("Cn", "Cs", "Co")).filter(
    lambda char: not any(low <= ord(char) <= high for low, high in _UNICODE_9_VS_14)
)


@pytest.mark.skipif(
    unicodedata.unidata_version != "14.0.0",
    reason="_UNICODE_9_VS_14 lists the differences from Python 3.11's Unicode 14.0 data",
)
@given(st.text(_SAME_IN_BOTH_DATABASES, max_size=300))
def test_any_text_tokenizes_as_the_reference_does(text: str) -> None:
    _same(_ours(), _reference(), text)


def test_soyombo_marks_differ_only_by_the_references_older_unicode_data(
    ours: WordPiece, reference: object
) -> None:
    """Pins why the property test skips _UNICODE_9_VS_14 (hypothesis found the text U+11A59).

    U+11A59 SOYOMBO VOWEL SIGN VOCALIC R is a non-spacing mark since Unicode 10.0: cairn
    strips it as an accent, the reference's Unicode 9.0 tables do not know it and keep it as
    an unknown word. If this fails, the reference updated its tables: drop the exclusion.
    """
    soyombo = "\U00011a59"
    assert unicodedata.category(soyombo) == "Mn"
    assert any(low <= ord(soyombo) <= high for low, high in _UNICODE_9_VS_14)
    assert ours.encode(soyombo, max_tokens=256) == [ours.cls, ours.sep]
    assert reference.encode(soyombo).ids == [ours.cls, ours.unk, ours.sep]  # type: ignore[attr-defined]


def test_a_vocabulary_without_its_special_tokens_is_refused(tmp_path: Path) -> None:
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("[PAD]\nhello\n##s\n", "utf-8")
    with pytest.raises(WordPieceError, match="CLS"):
        WordPiece.from_file(vocabulary)


def test_the_id_budget_keeps_cls_and_sep(ours: WordPiece) -> None:
    ids = ours.encode("word " * 100, max_tokens=8)
    assert len(ids) == 8
    assert ids[0] == ours.cls and ids[-1] == ours.sep
