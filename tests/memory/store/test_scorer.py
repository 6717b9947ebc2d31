"""The BM25F formula: field weights, saturation, length normalisation and idf."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cairn.memory.store.scorer import (
    DEFAULT_SCORER,
    MAX_TERM_WEIGHT,
    ScorerConfig,
    idf,
    idf_weight,
    score_value,
    term_weights,
)


def test_every_term_of_every_field_gets_a_weight() -> None:
    weights = term_weights("Use uv", "never pip", "run uv sync 漢字")
    assert set(weights) == {"use", "uv", "never", "pip", "run", "sync", "漢字"}


def test_at_typical_lengths_title_outweighs_description_outweighs_body() -> None:
    def words(count: int) -> str:
        return "payout " + " ".join(f"w{i:03d}" for i in range(count - 1))

    title = term_weights(words(6), "", "")["payout"]
    description = term_weights("", words(14), "")["payout"]
    body = term_weights("", "", words(80))["payout"]
    assert title > description > body


def test_the_same_term_in_a_longer_body_weighs_less() -> None:
    short = term_weights("", "", "payout failed")["payout"]
    long = term_weights("", "", "payout failed " + "other words here " * 40)["payout"]
    assert short > long


def test_repeating_a_term_raises_its_weight_with_diminishing_returns() -> None:
    one, two, ten = (term_weights("", "", " ".join(["ledger"] * n))["ledger"] for n in (1, 2, 10))
    assert one < two < ten
    assert ten - two < (two - one) * 8


def test_a_term_in_several_fields_weighs_more_than_in_one() -> None:
    both = term_weights("ledger", "ledger", "")["ledger"]
    assert both > term_weights("ledger", "", "")["ledger"]


def test_weights_are_integers_between_1_and_255() -> None:
    weights = term_weights("a title " * 30, "desc " * 200, "body " * 5000 + " rare")
    assert all(isinstance(w, int) and 1 <= w <= MAX_TERM_WEIGHT for w in weights.values())


def test_whole_body_is_scored_not_only_its_first_1200_characters() -> None:
    body = "filler text " * 200 + "PX-419"
    assert "419" in term_weights("", "", body)


def test_rarer_terms_have_higher_idf() -> None:
    assert idf(1, 1000) > idf(10, 1000) > idf(900, 1000) > 0


def test_idf_weight_is_a_positive_integer_even_for_a_term_in_every_document() -> None:
    assert idf_weight(1000, 1000) == 1
    assert idf_weight(1, 1000) > idf_weight(100, 1000)


def test_score_value_scales_integer_points_back_to_bm25_units() -> None:
    assert score_value(MAX_TERM_WEIGHT * 16) == 1.0


def test_fingerprint_changes_with_any_parameter() -> None:
    assert ScorerConfig(k1=1.5).fingerprint() != DEFAULT_SCORER.fingerprint()
    assert ScorerConfig().fingerprint() == DEFAULT_SCORER.fingerprint()


@given(st.text(), st.text(), st.text())
def test_any_text_gives_weights_in_range(title: str, description: str, body: str) -> None:
    weights = term_weights(title, description, body)
    assert all(1 <= weight <= MAX_TERM_WEIGHT for weight in weights.values())
