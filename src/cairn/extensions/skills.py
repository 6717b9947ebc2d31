"""Skills: ``<folder>/<name>/SKILL.md`` with its supporting files, in Anthropic's format.

Front matter: ``name`` (shown in lists; the folder's name is what the model and ``/name``
use), ``description`` (what it is for and when to use it: the only part the model sees until
it loads the skill), and Claude Code's optional keys ``when_to_use``, ``argument-hint``,
``arguments``, ``allowed-tools``, ``disable-model-invocation`` (only you can run it, as
``/name``) and ``user-invocable`` (``false``: only the model loads it). Other keys
(``license``, ``metadata`` ...) are accepted and ignored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cairn.config.extension_files import (
    SKILL_FILE,
    ExtensionFileError,
    granted_tools,
    load_each,
    read_extension_file,
    skill_files,
)
from cairn.config.extension_folders import Folder
from cairn.config.frontmatter import (
    FrontMatterError,
    field_bool,
    field_list,
    split_front_matter,
)
from cairn.extensions.commands import COMMAND_NAME, first_line

__all__ = ["MAX_LISTED_DESCRIPTION_CHARS", "SKILL_FILE", "Skill", "load_skills"]

MAX_LISTED_DESCRIPTION_CHARS = 1536  # of description + when_to_use in the system prompt's list
MAX_LISTED_FILES = 100  # supporting files named when a skill is loaded


@dataclass(frozen=True)
class Skill:
    """One skill folder."""

    name: str  # the folder's name: what the model asks for and /name runs
    title: str  # front matter `name`, for lists
    description: str
    body: str
    path: Path  # its SKILL.md
    folder: Folder
    when_to_use: str | None = None
    argument_hint: str | None = None
    arguments: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] = ()
    model_invocable: bool = True
    user_invocable: bool = True

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def where(self) -> str:
        return self.folder.shown(self.path)

    @property
    def listing(self) -> str:
        """What the model is told about the skill before loading it."""
        text = " ".join(t for t in (self.description, self.when_to_use or "") if t)
        if len(text) > MAX_LISTED_DESCRIPTION_CHARS:
            text = text[: MAX_LISTED_DESCRIPTION_CHARS - 1].rstrip() + "…"
        return text

    def other_files(self) -> list[str]:
        """The skill's other files, relative to its folder (at most :data:`MAX_LISTED_FILES`)."""
        found: list[str] = []
        for root, dirs, files in os.walk(self.directory):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                path = Path(root) / name
                if name.startswith(".") or path == self.path:
                    continue
                found.append(path.relative_to(self.directory).as_posix())
                if len(found) >= MAX_LISTED_FILES:
                    return found
        return found


def load_skills(folder: Folder) -> tuple[list[Skill], list[str]]:
    """The skills in ``folder`` (each sub-folder holding a ``SKILL.md``) and a warning for
    each one skipped."""
    return load_each(folder, skill_files(folder.path), lambda path: _load(path, folder))


def _load(path: Path, folder: Folder) -> Skill:
    name = path.parent.name
    if COMMAND_NAME.fullmatch(name) is None or ":" in name:
        raise ExtensionFileError(
            f"its folder name {name!r} cannot be a skill name (letters, digits, - and _, "
            "starting with a letter)"
        )
    front = split_front_matter(read_extension_file(path))
    fields = front.fields
    body = front.body.strip("\n")
    description = front.text("description") or first_line(body)
    if not description:
        raise FrontMatterError(
            "it has no `description` (the model needs it to know when to use it)"
        )
    return Skill(
        name=name,
        title=front.text("name") or name,
        description=description,
        body=body,
        path=path,
        folder=folder,
        when_to_use=front.text("when_to_use"),
        argument_hint=front.text("argument-hint"),
        arguments=field_list(fields, "arguments") or (),
        allowed_tools=granted_tools(front),
        model_invocable=not field_bool(fields, "disable-model-invocation", False),
        user_invocable=field_bool(fields, "user-invocable", True),
    )
