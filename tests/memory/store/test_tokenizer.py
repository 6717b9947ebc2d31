"""The Recall tokenizer: the reference system's rules plus English stemming and stop words
(issue #26), pinned case by case."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from cairn.memory.store import tokenizer
from cairn.memory.store.tokenizer import (
    MAX_QUERY_TOKENS,
    STOP_WORDS,
    normalize,
    query_tokens,
    surface_tokens,
    term_counts,
    tokenize,
    words,
)


def test_latin_words_of_three_or_more_characters_are_tokens() -> None:
    assert surface_tokens("Run the unit tests") == ["run", "the", "unit", "tests"]


def test_english_words_are_stemmed_and_stop_words_dropped() -> None:
    assert tokenize("Run the unit tests") == ["run", "unit", "test"]


def test_word_forms_share_one_stem() -> None:
    """The fast phase's miss in issue #26: "indent" did not find "indentation"."""
    assert tokenize("indent indents indentation indenting") == ["indent"] * 4
    assert tokenize("tests testing tested") == ["test"] * 3


def test_function_words_add_no_token() -> None:
    assert tokenize("where should they have been, and which of these would") == []


def test_stop_words_are_tokens_the_pattern_can_produce() -> None:
    assert all(words(word) == [word] for word in STOP_WORDS)


def test_two_letter_words_are_tokens_unless_stop_words() -> None:
    """"uv", "db", "CI" often say what a memory is about; the reference drops every word
    shorter than three characters (:func:`surface_tokens` keeps its rule for the baselines)."""
    assert tokenize("go to db on CI with uv") == ["go", "db", "ci", "uv"]
    assert tokenize("Ну да, это ок") == ["ну", "да", "это", "ок"]
    assert surface_tokens("go to db on CI with uv") == ["with"]


def test_contractions_leave_no_token() -> None:
    assert tokenize("you're sure we'll ship, I've checked, don't") == ["sure", "ship", "check"]


def test_runs_split_at_punctuation_and_underscores() -> None:
    assert tokenize("amount_minor, Ledger-Signature: v1=abc") == [
        "amount", "minor", "ledger", "signatur", "v1", "abc",
    ]  # fmt: skip


def test_digits_count_as_word_characters() -> None:
    tokens = surface_tokens("error PX-419 on port 5433, x1y")
    assert tokens == ["error", "419", "port", "5433", "x1y"]


def test_full_width_text_is_nfkc_normalised() -> None:
    assert tokenize("ＡＢＣ　Ｔｅｓｔｓ １２３") == ["abc", "test", "123"]


def test_normalize_lower_cases_after_nfkc() -> None:
    assert normalize("ＰｙＴｈｏｎ") == "python"


def test_cyrillic_greek_and_accented_latin_are_words() -> None:
    tokens = surface_tokens("Кириллица Ελληνικά café naïve")
    assert tokens == ["кириллица", "ελληνικά", "café", "naïve"]


def test_combining_marks_stay_inside_a_word() -> None:
    assert surface_tokens("cafe\u0301s") == ["cafés"]  # NFKC composes é


def test_cjk_runs_are_neither_stemmed_nor_filtered() -> None:
    text = "发布流程 本番にデプロイ 배포 전 ラーメン"
    assert tokenize(text) == surface_tokens(text)


def test_chinese_runs_become_code_point_bigrams() -> None:
    assert tokenize("发布流程") == ["发布", "布流", "流程"]


def test_a_single_cjk_character_yields_nothing() -> None:
    assert tokenize("表 run 字") == ["run"]


def test_katakana_prolonged_sound_mark_stays_in_the_run() -> None:
    assert tokenize("ラーメン") == ["ラー", "ーメ", "メン"]


def test_hiragana_and_han_mix_in_one_run() -> None:
    assert tokenize("本番にデプロイ") == ["本番", "番に", "にデ", "デプ", "プロ", "ロイ"]


def test_hangul_runs_become_bigrams() -> None:
    assert tokenize("배포 전") == ["배포"]


def test_latin_directly_followed_by_cjk_splits_into_both() -> None:
    assert tokenize("abc漢字") == ["abc", "漢字"]


def test_mixed_query_keeps_latin_words_and_cjk_bigrams() -> None:
    assert tokenize("CREATE INDEX 会锁表吗") == ["creat", "index", "会锁", "锁表", "表吗"]


def test_repeated_tokens_are_kept_by_tokenize() -> None:
    assert tokenize("test tests") == ["test", "test"]


def test_query_tokens_are_distinct_in_first_seen_order() -> None:
    assert query_tokens("pytest runs pytest fast") == ["pytest", "run", "fast"]


def test_query_tokens_keep_the_first_32_and_the_last_32_distinct_tokens() -> None:
    words = [f"w{i:03d}" for i in range(100)]
    tokens = query_tokens(" ".join(words))
    assert len(tokens) == MAX_QUERY_TOKENS
    assert tokens[:32] == words[:32]
    assert tokens[32:] == words[68:]


def test_query_tail_is_least_recently_used_first() -> None:
    words = [f"w{i:03d}" for i in range(70)]
    tokens = query_tokens(" ".join([*words, "w040"]))  # seeing w040 again moves it to the end
    assert tokens[-1] == "w040"
    assert "w037" not in tokens  # the oldest tail token was evicted instead
    assert len(tokens) == MAX_QUERY_TOKENS


def test_long_cjk_query_keeps_both_ends() -> None:
    text = (
        "我们这个月的月末结算又出问题了，商户那边反馈说报表打开要等十几秒，客服已经收到好几个投诉，"
        "财务也在催对账结果。我怀疑是数据库的问题，也可能是最近的发布引入的，但我不确定从哪里开始查。"
        "之前好像处理过类似的情况，当时是怎么解决报表查询慢的？"
    )
    tokens = query_tokens(text)
    assert len(tokens) == MAX_QUERY_TOKENS
    assert tokens[0] == "我们"
    assert "查询" in tokens and "询慢" in tokens


@given(st.text())
def test_tokenize_never_raises_and_yields_non_empty_tokens(text: str) -> None:
    assert all(token for token in tokenize(text))


@given(st.text())
def test_query_tokens_are_distinct_and_bounded(text: str) -> None:
    tokens = query_tokens(text)
    assert len(tokens) == len(set(tokens)) <= MAX_QUERY_TOKENS


_ASCII_TEXT = st.lists(
    st.sampled_from([*"abcxyzABCXYZ0189_-'.:/ \t\n\x7f", "the", "tests", "ing", "Where"]),
    max_size=60,
).map("".join)


@given(st.one_of(_ASCII_TEXT, st.text()))
def test_term_counts_are_the_counts_of_the_tokens(text: str) -> None:
    assert term_counts(text) == Counter(tokenize(text))


@given(st.one_of(_ASCII_TEXT, st.text(st.characters(max_codepoint=127))))
def test_ascii_text_splits_as_the_token_pattern_splits_it(text: str) -> None:
    """ASCII text is split without ``regex`` (start-up, issue #32): into the very runs the
    pattern finds."""
    assert tokenizer._runs(text) == tokenizer._pattern_runs(text)


def test_term_counts_stem_and_drop_stop_words_on_the_ascii_path() -> None:
    text = "Tests: the TESTING of indentation, where tests_run 123 ab a"
    assert term_counts(text) == {"test": 3, "indent": 1, "run": 1, "123": 1, "ab": 1}
    assert term_counts("the tests sind grün") == Counter(tokenize("the tests sind grün"))
