"""How replies are cut into wire chunks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cairn.testing.wire import argument_fragments, sse_frame


@given(st.text())
def test_argument_fragments_rejoin_to_the_arguments(arguments: str) -> None:
    fragments = argument_fragments(arguments)

    assert "".join(fragments) == arguments
    assert 1 <= len(fragments) <= 3


def test_arguments_of_two_characters_or_more_arrive_in_pieces() -> None:
    assert argument_fragments("{}") == ["{", "}"]
    assert len(argument_fragments('{"path": "README.md"}')) == 3


def test_a_payload_becomes_one_data_event() -> None:
    assert sse_frame('{"a": 1}') == b'data: {"a": 1}\n\n'


def test_a_payload_naming_its_field_is_sent_as_is() -> None:
    assert sse_frame("event: ping") == b"event: ping\n\n"
    assert sse_frame(": keep-alive") == b": keep-alive\n\n"
