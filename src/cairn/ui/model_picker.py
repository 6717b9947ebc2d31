"""The ``/model`` picker: the session's models (``model.available`` and the current one), the
current one marked, one that cannot be chosen marked with why. The switch itself is the shared
``/model <id>`` command's, so it is said, recorded and refused alike in every front end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import OptionList, Static

from cairn.session.models import ModelOption
from cairn.ui.choices import ChoiceScreen, numbered_options
from cairn.vocabulary.terminal import escape_for_terminal as shown

if TYPE_CHECKING:
    from cairn.ui.app import CairnApp

__all__ = ["ModelScreen", "pick_model"]


class ModelScreen(ChoiceScreen[str | None]):
    """Pick a model; answers its id (``None``: closed)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    def __init__(self, options: Sequence[ModelOption], current: str) -> None:
        super().__init__({option.id: option.id for option in options})
        self.options = list(options)
        self.current = current

    def compose(self) -> Any:
        with Vertical(classes="dialog"):
            yield Static(Text("Choose the model for this session", style="bold"))
            choices = [(option.id, self._label(option)) for option in self.options]
            yield numbered_options(choices, id="models")
            yield Static(Text("Enter or a digit switches · Esc closes", style="dim"))

    def on_mount(self) -> None:
        super().on_mount()
        current = next((i for i, o in enumerate(self.options) if o.id == self.current), 0)
        self.query_one("#models", OptionList).highlighted = current

    def _label(self, option: ModelOption) -> str:
        label = option.name if option.name == option.id else f"{option.name} ({option.id})"
        if option.unavailable:
            label += " (not available)"
        if option.id == self.current:
            label += " (current)"
        if option.shown_description:
            label += f" — {option.shown_description}"
        return shown(label, keep_newlines=False)

    def action_cancel(self) -> None:
        self.dismiss(None)


def pick_model(app: CairnApp) -> bool:
    """``/model`` alone: a picker of the session's models (when there is a choice; False when
    there is none); the pick runs ``/model <id>``, the shared command."""
    options = app.session.model_options()
    if len(options) < 2:
        return False

    def picked(model: str | None) -> None:
        if model is not None:
            app.call_next(app.submit, f"/model {model}")

    app.push_screen(ModelScreen(options, app.session.model), callback=picked)
    return True
