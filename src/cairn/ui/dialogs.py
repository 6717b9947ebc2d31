"""Modal dialogs: tool approval, ``ask_user_question``, the ``/resume`` picker and ``/settings``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from cairn.config.editor import EditableSetting
from cairn.config.settings import Settings
from cairn.recording.listing import SessionInfo
from cairn.tools.base import Question
from cairn.ui.choices import ChoiceScreen, focus_first_option, numbered_options
from cairn.ui.render import permission_preview, permission_title, recap_text
from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest
from cairn.vocabulary.permissions import permission_choices

__all__ = ["McpScreen", "PermissionScreen", "QuestionScreen", "ResumeScreen", "SettingsScreen"]

OTHER_ANSWER = "Type another answer…"
DONE_CHOOSING = "Done"


class PermissionScreen(ChoiceScreen[PermissionOutcome]):
    """Allow once / always / deny for one tool call: the digit of an option, or y, a, n."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "choose('allow_once')", "Allow once", show=False),
        Binding("a", "choose('allow_always')", "Allow always", show=False),  # when offered
        Binding("n,escape", "choose('reject')", "Deny", show=False),
    ]

    def __init__(self, request: PermissionRequest, cwd: Path | None = None) -> None:
        self._choices = permission_choices(request)
        super().__init__({choice.outcome: choice.outcome for choice in self._choices})
        self.request = request
        self.cwd = cwd

    def compose(self) -> Any:
        with Vertical(classes="dialog"):
            yield Static(permission_title(self.request))
            yield Static(Text(self.request.title), classes="dialog-subtitle")
            preview = permission_preview(self.request, self.cwd)
            if preview is not None:
                with VerticalScroll(classes="dialog-preview"):
                    yield Static(preview)
            yield numbered_options(
                ((choice.outcome, choice.label) for choice in self._choices),
                id="permission-choices",
            )


class QuestionScreen(ModalScreen[str | None]):
    """One ``ask_user_question`` question: pick an option, several, or type an answer."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "skip", "Skip", show=False)]

    def __init__(self, question: Question, position: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self.question = question
        self.position = position
        self.selected: list[str] = []

    def compose(self) -> Any:
        header = self.question.header or "Question"
        with Vertical(classes="dialog"):
            yield Static(Text.assemble((header, "bold"), (f"  {self.position}", "dim")))
            yield Static(Text(self.question.question), classes="dialog-subtitle")
            yield OptionList(*self._options(), id="question-options")
            answer = Input(placeholder="Your answer, then Enter", id="question-other")
            answer.display = False
            yield answer

    def on_mount(self) -> None:
        focus_first_option(self)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        label = str(event.option.id or "")
        if label == OTHER_ANSWER:
            other = self.query_one("#question-other", Input)
            other.display = True
            other.focus()
        elif label == DONE_CHOOSING:
            self.dismiss(", ".join(self.selected))
        elif self.question.multi_select:
            self._toggle(label, event.option_index)
        else:
            self.dismiss(label)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            self.dismiss(event.value.strip())

    def action_skip(self) -> None:
        self.dismiss(None)

    def _options(self) -> list[Option]:
        options = [
            Option(self._label(i, label), id=label) for i, label in enumerate(self.question.options)
        ]
        options.append(Option(Text(OTHER_ANSWER, style="dim"), id=OTHER_ANSWER))
        if self.question.multi_select:
            options.append(Option(Text(DONE_CHOOSING, style="bold"), id=DONE_CHOOSING))
        return options

    def _label(self, index: int, label: str) -> Text:
        mark = ""
        if self.question.multi_select:
            mark = "[x] " if label in self.selected else "[ ] "
        text = Text(f"{mark}{label}")
        descriptions = self.question.option_descriptions
        if index < len(descriptions) and descriptions[index]:
            text.append(f"  {descriptions[index]}", style="dim")
        return text

    def _toggle(self, label: str, index: int) -> None:
        if label in self.selected:
            self.selected.remove(label)
        else:
            self.selected.append(label)
        options = self.query_one(OptionList)
        options.replace_option_prompt_at_index(index, self._label(index, label))


class ResumeScreen(ModalScreen[str | None]):
    """The recorded sessions of this project, newest first, each with its last recap."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, sessions: Sequence[SessionInfo], current: str | None = None) -> None:
        super().__init__(classes="dialog-screen")
        self.sessions = list(sessions)
        self.current = current

    def compose(self) -> Any:
        with Vertical(classes="dialog dialog-wide"):
            yield Static(Text("Resume a session", style="bold"))
            if not self.sessions:
                yield Static(Text("No recorded sessions in this project yet.", style="dim"))
            options: list[Option | None] = []
            for info in self.sessions:
                options += [self._option(info), None]  # None: a separator line
            yield OptionList(*options[:-1], id="resume-sessions")
            yield Static(Text("Enter resumes · Esc closes", style="dim"))

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.sessions:
            options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_close(self) -> None:
        self.dismiss(None)

    def _option(self, info: SessionInfo) -> Option:
        text = Text(info.first_prompt or "(no prompt)", style="bold")
        started = info.start_time.astimezone().strftime("%Y-%m-%d %H:%M")
        current = " · current" if info.session_id == self.current else ""
        text.append(
            f"\n{started} · {info.message_count} messages · {info.session_id[:8]}{current}",
            style="dim",
        )
        if info.last_recap:
            text.append("\n")
            text.append_text(recap_text(info.last_recap))
        return Option(text, id=info.session_id)


class McpScreen(ModalScreen[None]):
    """``/mcp``: the session's MCP servers, redrawn whenever one connects, fails or changes."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", show=False)]

    def __init__(
        self, describe: Callable[[], str], changed: Callable[[], Awaitable[None]] | None
    ) -> None:
        super().__init__(classes="dialog-screen")
        self._describe = describe
        self._changed = changed

    def compose(self) -> Any:
        with Vertical(classes="dialog dialog-wide"):
            yield Static(Text("MCP servers", style="bold"))
            yield Static(self._describe(), id="mcp-status")
            yield Static(Text("Esc closes · updates as servers connect", style="dim"))

    def on_mount(self) -> None:
        if self._changed is not None:
            self.run_worker(self._follow(), exclusive=True)

    async def _follow(self) -> None:
        assert self._changed is not None
        while True:
            await self._changed()
            self.query_one("#mcp-status", Static).update(self._describe())

    def action_close(self) -> None:
        self.dismiss(None)


SettingSaver = Callable[[EditableSetting, Any], Awaitable[str]]


class SettingsScreen(ModalScreen[None]):
    """The editable settings with their current values; changes apply at once and are saved."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", show=False)]

    def __init__(
        self, settings: Settings, editable: Sequence[EditableSetting], save: SettingSaver
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.settings = settings
        self.editable = list(editable)
        self._save = save
        self._editing: EditableSetting | None = None

    def compose(self) -> Any:
        with Vertical(classes="dialog dialog-wide"):
            yield Static(Text("Settings", style="bold"))
            yield OptionList(*[self._option(s) for s in self.editable], id="settings-list")
            value = Input(id="settings-value")
            value.display = False
            yield value
            yield Static(
                Text("Enter changes the setting · Esc closes", style="dim"), id="settings-message"
            )

    def on_mount(self) -> None:
        focus_first_option(self)

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        setting = self.editable[event.option_index]
        if setting.kind in ("bool", "choice"):
            await self._apply(setting, _next_choice(setting, setting.get(self.settings)))
            return
        self._editing = setting
        field = self.query_one("#settings-value", Input)
        field.value = _show(setting.get(self.settings))
        field.display = True
        field.focus()

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        setting = self._editing
        if setting is None:
            return
        from cairn.config.loader import SettingsError

        try:
            value = setting.parse(event.value)
        except SettingsError as exc:
            self._message(str(exc), error=True)
            return
        self._editing = None
        event.input.display = False
        await self._apply(setting, value)
        self.query_one(OptionList).focus()

    def action_close(self) -> None:
        if self._editing is not None:
            self._editing = None
            self.query_one("#settings-value", Input).display = False
            self.query_one(OptionList).focus()
            return
        self.dismiss(None)

    async def _apply(self, setting: EditableSetting, value: Any) -> None:
        message = await self._save(setting, value)
        error = message.startswith("Could not")
        self._message(message, error=error)
        options = self.query_one(OptionList)
        index = self.editable.index(setting)
        options.replace_option_prompt_at_index(index, self._prompt(setting))

    def _message(self, text: str, *, error: bool = False) -> None:
        self.query_one("#settings-message", Static).update(
            Text(text, style="red" if error else "green")
        )

    def _option(self, setting: EditableSetting) -> Option:
        return Option(self._prompt(setting), id=setting.key)

    def _prompt(self, setting: EditableSetting) -> Text:
        text = Text(setting.key, style="bold")
        text.append(f"  {_show(setting.get(self.settings))}", style="cyan")
        if setting.description:
            text.append(f"\n{setting.description}", style="dim")
        return text


def _next_choice(setting: EditableSetting, current: Any) -> Any:
    if setting.kind == "bool":
        return not bool(current)
    choices = setting.choices
    index = choices.index(str(current)) if str(current) in choices else -1
    return choices[(index + 1) % len(choices)]


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
