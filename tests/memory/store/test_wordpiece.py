"""cairn's WordPiece tokenizer gives the ids Hugging Face's ``tokenizers`` gives for
all-MiniLM-L6-v2 (the model was trained with those), on any text (issue #26)."""

from __future__ import annotations

import functools
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


_ASSIGNED = st.characters(blacklist_categories=("Cn", "Cs", "Co"))


@given(st.text(_ASSIGNED, max_size=300))
def test_any_text_tokenizes_as_the_reference_does(text: str) -> None:
    _same(_ours(), _reference(), text)


def test_a_vocabulary_without_its_special_tokens_is_refused(tmp_path: Path) -> None:
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("[PAD]\nhello\n##s\n", "utf-8")
    with pytest.raises(WordPieceError, match="CLS"):
        WordPiece.from_file(vocabulary)


def test_the_id_budget_keeps_cls_and_sep(ours: WordPiece) -> None:
    ids = ours.encode("word " * 100, max_tokens=8)
    assert len(ids) == 8
    assert ids[0] == ours.cls and ids[-1] == ours.sep
