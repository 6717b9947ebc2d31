"""JSON from outside made safe before a session sees it (session/boundary.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.content import scrub_surrogates
from cairn.session.boundary import MAX_JSON_DEPTH, TooDeep, clean_json, json_depth


def test_lone_surrogates_become_replacement_characters_in_values_and_keys() -> None:
    raw = json.loads('{"a\\ud800": ["x\\udfffy", {"k": "\\ud83d\\ude00 ok"}], "n": 1}')

    assert clean_json(raw) == {"a\ufffd": ["x\ufffdy", {"k": "😀 ok"}], "n": 1}


def test_text_without_surrogates_is_the_same_object() -> None:
    text = "plain ü text"

    assert scrub_surrogates(text) is text


def test_depth_counts_arrays_and_objects() -> None:
    assert [json_depth(v) for v in (1, [], [[]], {"a": [{"b": 1}]})] == [0, 1, 2, 3]


def test_a_structure_deeper_than_the_limit_is_refused() -> None:
    deep: Any = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]

    with pytest.raises(TooDeep):
        clean_json(deep)
    assert clean_json(deep[0]) == deep[0]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_anything_cleaned_can_be_written_as_utf8_json(value: Any) -> None:
    json.dumps(clean_json(value), ensure_ascii=False).encode("utf-8")
