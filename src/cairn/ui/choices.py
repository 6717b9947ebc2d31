"""Numbered choice dialogs: the options a dialog's digit keys pick ("1. Allow once", ...)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, Screen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

__all__ = ["ChoiceScreen", "focus_first_option", "numbered_options"]

_T = TypeVar("_T")


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


class ChoiceScreen(ModalScreen[_T]):
    """A dialog answered by one of its numbered options: Enter on it, its digit, or a key a
    subclass binds to ``choose(key)``. A key the dialog does not offer does nothing."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(str(n), f"pick({n})", show=False) for n in range(1, 10)
    ]

    def __init__(self, answers: Mapping[str, _T]) -> None:
        """``answers``: what each offered option's key (its id) dismisses the dialog with."""
        super().__init__(classes="dialog-screen")
        self.answers = answers

    def on_mount(self) -> None:
        focus_first_option(self)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_choose(event.option.id or "")

    def action_pick(self, number: int) -> None:
        """The option shown as ``number``; the digit of one that is not shown does nothing."""
        options = self.query_one(OptionList)
        if 1 <= number <= options.option_count:
            self.action_choose(options.get_option_at_index(number - 1).id or "")

    def action_choose(self, key: str) -> None:
        if key in self.answers:
            self.dismiss(self.answers[key])
