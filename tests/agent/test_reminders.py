from hypothesis import given
from hypothesis import strategies as st

from cairn.agent.reminders import (
    is_system_reminder,
    strip_system_reminder_blocks,
    system_reminder,
)


def test_complete_blocks_are_removed_without_inserting_anything():
    assert strip_system_reminder_blocks("a<system-reminder>x</system-reminder>b") == "ab"


def test_an_unclosed_block_drops_everything_after_its_opening_tag():
    assert strip_system_reminder_blocks("keep <system-reminder>secret") == "keep "


def test_several_blocks_and_surrounding_text_are_handled_in_order():
    text = "1<system-reminder>a</system-reminder>2<system-reminder>b</system-reminder>3"
    assert strip_system_reminder_blocks(text) == "123"


def test_a_wrapped_reminder_is_recognised_as_one():
    assert is_system_reminder(system_reminder("note").text)
    assert not is_system_reminder("plain text")


@given(st.text())
def test_stripping_never_fails_and_never_leaves_an_opening_tag(text):
    out = strip_system_reminder_blocks(text)
    assert "<system-reminder>" not in out
