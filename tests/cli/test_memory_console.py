"""``cairn memory``'s console writes plain text itself only where rich would write the same
bytes (issue #28: rich's import was part of every command's start-up)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from cairn.cli.memory_console import prints_as_is


class _Pipe(io.StringIO):
    encoding = "utf-8"  # as a pipe's stream reports it (a StringIO says None)


def _rich(text: str, width: int, style: str | None) -> str:
    stream = _Pipe()
    Console(file=stream, width=width, highlight=False, soft_wrap=True).print(
        text, style=style, markup=False
    )
    return stream.getvalue()


@given(
    text=st.text(),
    width=st.integers(min_value=1, max_value=200),
    style=st.sampled_from([None, "bold", "italic"]),
)
def test_text_written_as_is_is_what_rich_writes(text: str, width: int, style: str | None) -> None:
    if prints_as_is(_Pipe(), text):
        assert _rich(text, width, style) == text + "\n"


@pytest.mark.parametrize(
    "text",
    [
        "Use uv",
        "project · project · saved today · /tmp/a b/project/uv.md",
        "a: b, c: d",
        "[bold]not markup[/bold]",
        "Tacos.\nSecond line.",
        "",
        "日本語のメモ",
    ],
)
def test_plain_lines_are_written_as_they_are(text: str) -> None:
    assert prints_as_is(_Pipe(), text)
    assert _rich(text, 10, "bold") == text + "\n"


@pytest.mark.parametrize(
    "text",
    [
        "Bring cake :cake: now.",  # rich writes the emoji
        "\ttabbed",  # rich expands the tab
        "trailing  \nspaces",  # rich trims them past the width
        "a\rb",  # rich drops the carriage return
        "no\u00a0break",
        "\x1b[31mred",
    ],
)
def test_text_rich_would_change_goes_to_rich(text: str) -> None:
    assert not prints_as_is(_Pipe(), text)


def test_a_terminal_or_a_forced_terminal_goes_to_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(_Pipe):
        def isatty(self) -> bool:
            return True

    assert not prints_as_is(Terminal(), "Use uv")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.setenv(name, "1")
        assert not prints_as_is(_Pipe(), "Use uv")
        monkeypatch.delenv(name)
    assert prints_as_is(_Pipe(), "Use uv")


def test_text_the_stream_may_not_encode_goes_to_rich() -> None:
    class Ascii(_Pipe):
        encoding = "ascii"

    assert prints_as_is(Ascii(), "Use uv")
    assert not prints_as_is(Ascii(), "Café")
