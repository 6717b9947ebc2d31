"""The main system prompt and the conversation's startup context."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from pathlib import Path

from cairn.agent.reminders import system_reminder
from cairn.config import Inputs, StampedCache
from cairn.content import Content, Text
from cairn.values import Value

__all__ = ["STARTUP_CONTEXT_ACK", "SystemPrompt", "build_system_prompt", "startup_context"]

STARTUP_CONTEXT_ACK = "Got it. Thanks for the context!"
MAX_LISTING_ENTRIES = 200  # workspace entries shown in the startup context
_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".ruff_cache"}
# Each folder's listing, kept while every folder it lists is unchanged (a session each).
LISTINGS: StampedCache[tuple[str, tuple[str, ...]]] = StampedCache()

CORE_PROMPT = """\
You are cairn, an AI coding agent working in the user's terminal, inside their project.

# How you work
- Understand before you change: read the relevant files and search the code before editing.
- Make the smallest change that fully solves the task, in the project's existing style.
- Verify your work: run the project's tests or the command that shows the change works.
- Use absolute or workspace-relative paths with the file tools; never touch files outside the
  workspace.
- Explain what you are about to do in one short sentence before calling tools that change things.
- Keep answers short and direct. Use Markdown where it helps; no filler.
- When a task has several steps, track them with `todo_write` and keep the list current.
- If you need a decision only the user can make, ask with `ask_user_question`.
- Never invent file contents, command output or APIs: check them with a tool.
"""


class SystemPrompt(Value):
    """The main system prompt, kept as its sections (a recap reuses the project's part)."""

    core: str = CORE_PROMPT
    context_files: str = ""  # the user's context files (CAIRN.md ...)
    memory: str = ""  # the auto-memory section with its index
    append: str = ""
    skills: str = ""  # the skills the model may load (names and descriptions)

    @property
    def project_context(self) -> str:
        """What the prompt says about this project: context files and memory, or ``""``."""
        return _joined(self.context_files, self.memory)

    @property
    def text(self) -> str:
        """The prompt as the model gets it: the core, then each non-empty section."""
        return _joined(self.core, self.context_files, self.skills, self.memory, self.append)


def build_system_prompt(
    *, context_files: str = "", memory_section: str = "", append: str = "", skills: str = ""
) -> SystemPrompt:
    """The core prompt, then the user's context files, the skills, then the memory section."""
    return SystemPrompt(
        context_files=context_files.strip(),
        memory=memory_section.strip(),
        append=append.strip(),
        skills=skills.strip(),
    )


def _joined(*blocks: str) -> str:
    return "\n\n---\n\n".join(block.strip() for block in blocks if block.strip())


def startup_context(
    cwd: Path, *, today: _dt.date | None = None, extra_dirs: Sequence[Path] = ()
) -> list[Content]:
    """The two opening entries: an environment summary and the model's acknowledgement.
    ``extra_dirs``: more folders the file tools may use (an editor's extra workspace roots)."""
    day = (today or _dt.date.today()).strftime("%A, %B %d, %Y")
    listing = _listing(cwd)
    also = (
        f"I can also work in these directories: {', '.join(str(d) for d in extra_dirs)}\n"
        if extra_dirs
        else ""
    )
    text = (
        "This is cairn, setting up the context for our chat.\n"
        f"Today's date is {day}.\n"
        f"My operating system is: {_operating_system()}\n"
        f"I'm currently working in the directory: {cwd}\n"
        f"{also}"
        f"Here is the folder structure of the current working directory:\n\n{listing}"
    )
    return [Content("user", [system_reminder(text)]), Content("model", [Text(STARTUP_CONTEXT_ACK)])]


def _listing(cwd: Path) -> str:
    """The folder structure, as kept in :data:`LISTINGS` while no folder it lists changed."""
    text, _ = LISTINGS.get(str(cwd), lambda: _walk(cwd), _listed_folders)
    return text


def _listed_folders(listing: tuple[str, tuple[str, ...]]) -> Inputs:
    inputs = Inputs(parents=False)  # a folder's times move when an entry comes or goes
    for folder in listing[1]:
        inputs.folder(folder)
    return inputs


def _walk(cwd: Path) -> tuple[str, tuple[str, ...]]:
    """The listing, and the folders whose entries it read."""
    lines: list[str] = []
    visited: list[str] = []
    try:
        for root, dirs, files in os.walk(cwd):
            visited.append(root)
            depth = len(Path(root).relative_to(cwd).parts)
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            if depth >= 2:
                dirs[:] = []
            indent = "  " * depth
            entries = [f"{indent[:-2]}{Path(root).name}/"] if depth else []
            entries += [f"{indent}{name}" for name in sorted(files)]
            for entry in entries:  # folder lines count towards the cap as much as files
                lines.append(entry)
                if len(lines) >= MAX_LISTING_ENTRIES:
                    lines.append(f"{indent}... (listing truncated)")
                    return "\n".join(lines), tuple(visited)
    except OSError:
        return "(the folder could not be listed)", tuple(visited)
    return "\n".join(lines) or "(empty folder)", tuple(visited)


def _operating_system() -> str:
    """``platform.system()`` and ``platform.release()``, read from ``os.uname`` where there is
    one (importing ``platform`` costs a start-up about 8 M instructions)."""
    if hasattr(os, "uname"):
        info = os.uname()
        return f"{info.sysname} {info.release}"
    import platform

    return f"{platform.system()} {platform.release()}"
