"""The terminal UI's stylesheet: each CSS source parsed once a process, per theme."""

from __future__ import annotations

import pytest
from textual.color import Color
from textual.css.stylesheet import StylesheetParseError

from cairn.ui.styles import SharedStylesheet

SOURCE = "Screen { background: $accent; }"


def parsed(variables: dict[str, str], css: str = SOURCE) -> SharedStylesheet:
    sheet = SharedStylesheet(variables=variables)
    sheet.add_source(css, read_from=("test_styles.py", "SOURCE"))
    sheet.parse()
    return sheet


def background(sheet: SharedStylesheet) -> Color | None:
    [rule] = sheet.rules
    return rule.styles.background


async def test_a_second_app_uses_the_rules_the_first_app_parsed(make_app):
    first, second = make_app(), make_app()
    async with first.run_test(size=(80, 24)):
        pass
    async with second.run_test(size=(80, 24)):
        pass

    first_rules, second_rules = first.stylesheet.rules, second.stylesheet.rules
    assert len(second_rules) == len(first_rules) > 0
    assert all(a is b for a, b in zip(first_rules, second_rules, strict=True))


def test_another_theme_gets_rules_of_its_own():
    red, blue = parsed({"accent": "red"}), parsed({"accent": "blue"})

    assert background(red) == Color.parse("red")
    assert background(blue) == Color.parse("blue")
    assert background(parsed({"accent": "red"})) == Color.parse("red")


def test_changing_the_variables_reparses_with_the_new_ones():
    sheet = parsed({"accent": "red"})

    sheet.set_variables({"accent": "green"})
    sheet.reparse()

    assert background(sheet) == Color.parse("green")


def test_bad_css_on_reparse_raises_and_leaves_the_rules_as_they_were():
    sheet = parsed({"accent": "red"})
    before = list(sheet.rules)
    sheet.add_source("Screen { background: not-a-colour; }", read_from=("test_styles.py", "BAD"))

    with pytest.raises(StylesheetParseError):
        sheet.reparse()
    assert sheet.rules == before
