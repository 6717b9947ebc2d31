"""What an editor or a daemon client builds a session's menus and lists from, as ``session/update``
payloads in ACP's wire shape (see :mod:`cairn.session.updates`): the slash commands, the
approval modes and the ``configOptions`` (the model and approval-mode selects)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from cairn.session.models import ModelOption
    from cairn.session.session import Session

__all__ = [
    "MODEL_OPTION_ID",
    "MODE_DESCRIPTIONS",
    "MODE_OPTION_ID",
    "ListedCommand",
    "Payload",
    "commands_update",
    "config_option_update",
    "config_options",
    "mode_state",
    "mode_update",
    "session_config_options",
]

Payload: TypeAlias = dict[str, Any]  # one update's JSON object

MODE_DESCRIPTIONS: dict[str, tuple[str, str]] = {  # approval mode -> (name, description)
    "plan": ("Plan", "Read and plan only: no edits and no commands."),
    "default": ("Default", "Ask before edits and commands."),
    "auto-edit": ("Auto edit", "Edit files without asking; ask before commands."),
    "yolo": ("YOLO", "Never ask: run every tool call."),
}


class ListedCommand(Protocol):
    """A slash command as a client lists it (a ``SlashCommand`` or a ``CommandInfo``)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def hint(self) -> str | None: ...


def commands_update(commands: Iterable[ListedCommand]) -> Payload:
    """``available_commands_update``: the slash commands a client can offer."""
    listed: list[Payload] = []
    for command in commands:
        entry: Payload = {"name": command.name, "description": command.description}
        if command.hint:
            entry["input"] = {"hint": command.hint}
        listed.append(entry)
    return {"sessionUpdate": "available_commands_update", "availableCommands": listed}


def mode_update(mode: str) -> Payload:
    return {"sessionUpdate": "current_mode_update", "currentModeId": mode}


def mode_state(current: str, modes: Sequence[str]) -> Payload:
    """The approval modes as ACP's ``modes`` (``session/new`` and ``session/load`` answers)."""
    available: list[Payload] = []
    for mode in modes:
        name, description = MODE_DESCRIPTIONS.get(mode, (mode, ""))
        entry: Payload = {"id": mode, "name": name}
        if description:
            entry["description"] = description
        available.append(entry)
    return {"currentModeId": current, "availableModes": available}


# ----- configOptions: the model and approval-mode menus -----

MODEL_OPTION_ID = "model"
MODE_OPTION_ID = "mode"


def config_options(
    *, model: str, models: Iterable[ModelOption], mode: str, modes: Sequence[str]
) -> list[Payload]:
    """ACP ``configOptions``: a ``model`` select and a ``mode`` select (the approval modes)."""
    model_values: list[Payload] = []
    for option in models:
        entry: Payload = {"value": option.id, "name": option.shown_name}
        if option.shown_description:
            entry["description"] = option.shown_description
        model_values.append(entry)
    mode_values = [
        {"value": item["id"], "name": item["name"], "description": item["description"]}
        if "description" in item
        else {"value": item["id"], "name": item["name"]}
        for item in mode_state(mode, modes)["availableModes"]
    ]
    return [
        {
            "id": MODEL_OPTION_ID,
            "name": "Model",
            "description": "The model this session's requests go to.",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": model_values,
        },
        {
            "id": MODE_OPTION_ID,
            "name": "Approval mode",
            "description": "What the agent may do without asking.",
            "category": "mode",
            "type": "select",
            "currentValue": mode,
            "options": mode_values,
        },
    ]


def config_option_update(options: list[Payload]) -> Payload:
    return {"sessionUpdate": "config_option_update", "configOptions": options}


def session_config_options(session: Session) -> list[Payload]:
    """``session``'s configOptions now (``session/new``, ``session/load``, the daemon)."""
    from cairn.config.settings import APPROVAL_MODES

    return config_options(
        model=session.model,
        models=session.model_options(),
        mode=session.approval_mode,
        modes=APPROVAL_MODES,
    )
