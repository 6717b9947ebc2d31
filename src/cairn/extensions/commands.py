"""Slash commands from files: Claude Code's Markdown commands and Qwen Code's TOML ones.

A file ``<folder>/git/commit.md`` is the command ``/git:commit``: sub-folders namespace it.

- Markdown (``.md``): optional front matter, then the prompt. Front matter keys (Claude Code's):
  ``description`` (shown in lists; default: the prompt's first line), ``argument-hint`` (what
  to type after the name), ``model`` (the model for this prompt's turn), ``allowed-tools``
  (tools that run without asking during that turn, as permission rules: ``Bash(git add *)``).
- TOML (``.toml``, Qwen Code and Gemini CLI): ``prompt`` (required) and ``description``.

How the prompt is filled in is :mod:`cairn.extensions.templates` (Qwen Code's files use its
``{{args}}`` syntax). A file that cannot be read or whose front matter is malformed is skipped
with one warning naming it; so is a file whose name cannot be typed as a command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cairn.config.extension_files import (
    COMMAND_SUFFIXES,
    ExtensionFileError,
    granted_tools,
    load_each,
    read_extension_file,
    walk_files,
)
from cairn.config.extension_folders import Folder
from cairn.config.frontmatter import FrontMatterError, split_front_matter
from cairn.extensions.templates import Dialect

__all__ = [
    "COMMAND_NAME",
    "CommandFile",
    "first_line",
    "load_command_file",
    "load_commands",
]

COMMAND_NAME = re.compile(r"[A-Za-z][\w-]*(?::[A-Za-z0-9][\w-]*)*")  # "git:commit"
MAX_DESCRIPTION_CHARS = 200  # of a description taken from a prompt's first line


@dataclass(frozen=True)
class CommandFile:
    """One command read from a file."""

    name: str  # "git:commit" (typed as /git:commit)
    description: str
    body: str  # the prompt, before arguments are put in
    path: Path
    folder: Folder
    dialect: Dialect
    argument_hint: str | None = None
    model: str | None = None
    allowed_tools: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """The file as people see it: ``.claude/commands/git/commit.md``."""
        return self.folder.shown(self.path)


def load_commands(folder: Folder) -> tuple[list[CommandFile], list[str]]:
    """The commands in ``folder`` and a warning for each file skipped."""
    paths = walk_files(folder.path, COMMAND_SUFFIXES)
    return load_each(folder, paths, lambda path: load_command_file(path, folder))


def load_command_file(path: Path, folder: Folder) -> CommandFile:
    """The command in ``path``; :class:`ExtensionFileError` or :class:`FrontMatterError`
    says why it is not one."""
    name = _command_name(path, folder)
    text = read_extension_file(path)
    if path.suffix == ".toml":
        return _toml_command(name, text, path, folder)
    front = split_front_matter(text)
    body = front.body.strip("\n")
    description = front.text("description") or first_line(body) or f"/{name}"
    return CommandFile(
        name=name,
        description=description,
        body=body,
        path=path,
        folder=folder,
        dialect="qwen" if folder.origin == "qwen" else "command",
        argument_hint=front.text("argument-hint"),
        model=_model(front.text("model")),
        allowed_tools=granted_tools(front),
    )


def _toml_command(name: str, text: str, path: Path, folder: Folder) -> CommandFile:
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FrontMatterError(f"it is not valid TOML ({exc})") from None
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise FrontMatterError("its `prompt` must be a non-empty string")
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        raise FrontMatterError("its `description` must be a string")
    body = prompt.strip("\n")
    return CommandFile(
        name=name,
        description=(description or "").strip() or first_line(body) or f"/{name}",
        body=body,
        path=path,
        folder=folder,
        dialect="qwen",
    )


def _command_name(path: Path, folder: Folder) -> str:
    relative = path.relative_to(folder.path).with_suffix("")
    name = ":".join(part.replace(":", "_") for part in relative.parts)
    if COMMAND_NAME.fullmatch(name) is None:
        raise ExtensionFileError(
            f"/{name} cannot be typed as a command (names use letters, digits, - and _, "
            "and start with a letter)"
        )
    return name


def _model(value: str | None) -> str | None:
    return None if value is None or value.lower() == "inherit" else value


def first_line(body: str) -> str:
    """The first line of text in ``body`` (headings unmarked), cut for a list."""
    for line in body.splitlines():
        text = line.strip().lstrip("#").strip()
        if text:
            if len(text) > MAX_DESCRIPTION_CHARS:
                return text[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
            return text
    return ""

