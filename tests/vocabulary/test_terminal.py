"""Text from a model, a tool or a project file is escaped before it reaches a terminal."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from cairn.vocabulary.terminal import BIDI_CONTROLS, escape_for_terminal


def unsafe(char: str, *, keep_newlines: bool = True) -> bool:
    if keep_newlines and char in "\n\t":
        return False
    return unicodedata.category(char) == "Cc" or char in BIDI_CONTROLS


def test_an_osc_52_clipboard_write_and_a_screen_clear_are_shown_not_run() -> None:
    text = "done\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x1b[H"

    assert escape_for_terminal(text) == "done\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\x1b[H"


def test_a_right_to_left_override_is_shown_as_an_escape() -> None:
    """Regression (issue 24, low): ``cairn trust`` showed a hook command with U+202E as it would
    read reversed."""
    assert escape_for_terminal("echo \u202egnp.exe") == "echo \\u202egnp.exe"


def test_c1_controls_and_del_are_escaped() -> None:
    assert escape_for_terminal("a\x9b2Jb\x7f") == "a\\x9b2Jb\\x7f"


def test_lines_tabs_and_crlf_are_kept_but_a_lone_carriage_return_is_shown() -> None:
    assert escape_for_terminal("a\tb\r\nc\n") == "a\tb\r\nc\n"
    assert escape_for_terminal("safe\rrm -rf ~") == "safe\\x0drm -rf ~"


def test_a_one_line_value_shows_its_newlines() -> None:
    shown = escape_for_terminal("ls\n  hook: true\r\n", keep_newlines=False)

    assert shown == "ls\\x0a  hook: true\\x0d\\x0a"


def test_plain_text_is_returned_as_is() -> None:
    text = "héllo — 世界 🙂 ``code``"

    assert escape_for_terminal(text) is text


@given(st.text(), st.booleans())
def test_no_unsafe_character_survives(text: str, keep_newlines: bool) -> None:
    shown = escape_for_terminal(text, keep_newlines=keep_newlines)
    if keep_newlines:  # a CRLF line end is kept on purpose; a carriage return alone is not
        shown = shown.replace("\r\n", "\n")

    assert not any(unsafe(c, keep_newlines=keep_newlines) for c in shown)


@given(st.text(), st.text())
def test_escaping_in_chunks_equals_escaping_the_whole(head: str, tail: str) -> None:
    if head.endswith("\r"):  # a CRLF split across two chunks is the one difference
        head = head[:-1]

    assert escape_for_terminal(head) + escape_for_terminal(tail) == escape_for_terminal(
        head + tail
    )


@given(st.text())
def test_safe_characters_pass_through_unchanged(text: str) -> None:
    safe = "".join(c for c in text if not unsafe(c) and c != "\r")

    assert escape_for_terminal(safe) == safe
