"""Numbered choice lists: the options a dialog's digit bindings pick ("1. Allow once", ...)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.screen import Screen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

__all__ = ["focus_first_option", "numbered_options"]


def numbered_options(choices: Iterable[tuple[str, str]], *, id: str) -> OptionList:
    """An option list of ``(key, label)`` choices shown as "1. label", "2. label", ...; each
    option's id is its key."""
    return OptionList(
        *[Option(f"{i}. {label}", id=key) for i, (key, label) in enumerate(choices, 1)], id=id
    )


def focus_first_option(screen: Screen[Any]) -> None:
    """A dialog opens with its first option highlighted and the keyboard on the list."""
    options = screen.query_one(OptionList)
    options.highlighted = 0
    options.focus()
