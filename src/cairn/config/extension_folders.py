"""Where command, skill and agent files are looked for, in the order that decides a clash.

cairn's own folders come first: ``$CAIRN_HOME/<kind>/`` (yours, in every project), then
``<project>/.cairn/<kind>/``. Then the folders of the tools a setting imports from
(``commands.importFrom``, ``skills.importFrom``, ``agents.importFrom``), each as
``~/.<tool>/<kind>/`` then ``<project>/.<tool>/<kind>/``. When two files define the same name,
the earlier folder wins: cairn's over another tool's, and yours over the project's, so a
repository cannot replace a command, skill or agent you rely on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, TypeAlias

from cairn.values import Value

__all__ = ["MAX_DEPTH", "Folder", "Kind", "Origin", "Scope", "folders"]

Kind: TypeAlias = Literal["commands", "skills", "agents"]
Scope: TypeAlias = Literal["user", "project"]
Origin: TypeAlias = Literal["cairn", "claude", "qwen", "agents"]
MAX_DEPTH = 8  # sub-folder levels searched under one folder

# The folder name each tool keeps its files in, under the home folder and the project.
_DOT_FOLDERS: dict[Origin, str] = {
    "cairn": ".cairn",
    "claude": ".claude",
    "qwen": ".qwen",
    "agents": ".agents",
}


class Folder(Value):
    """One folder files of one kind are read from."""

    path: Path
    scope: Scope
    origin: Origin  # whose format the files are in

    @property
    def label(self) -> str:
        """How people see the folder: ``.claude/commands`` (project), ``~/.cairn/skills``."""
        kind = self.path.name
        if self.scope == "project":
            return f"{_DOT_FOLDERS[self.origin]}/{kind}"
        if self.origin == "cairn":
            return f"$CAIRN_HOME/{kind}"
        return f"~/{_DOT_FOLDERS[self.origin]}/{kind}"

    def shown(self, path: Path) -> str:
        """A file of this folder as people see it: ``.claude/commands/git/commit.md``."""
        try:
            return f"{self.label}/{path.relative_to(self.path).as_posix()}"
        except ValueError:
            return str(path)


def folders(
    kind: Kind,
    *,
    project_root: Path,
    cairn_home: Path,
    home: Path | None,
    import_from: Iterable[Origin] = (),
) -> list[Folder]:
    """The folders of ``kind``, highest precedence first (see the module's docstring)."""
    found: list[Folder] = [
        Folder(cairn_home / kind, "user", "cairn"),
        Folder(project_root / ".cairn" / kind, "project", "cairn"),
    ]
    for origin in _unique(import_from):
        if origin == "cairn":
            continue
        dot = _DOT_FOLDERS[origin]
        if home is not None:
            found.append(Folder(home / dot / kind, "user", origin))
        found.append(Folder(project_root / dot / kind, "project", origin))
    return _without_repeats(found)


def _unique(origins: Iterable[Origin]) -> Sequence[Origin]:
    seen: list[Origin] = []
    for origin in origins:
        if origin not in seen:
            seen.append(origin)
    return seen


def _without_repeats(found: list[Folder]) -> list[Folder]:
    """One entry per folder: with the project at the home folder, its files are the user's."""
    kept: list[Folder] = []
    paths: set[Path] = set()
    for folder in found:
        key = folder.path.absolute()
        if key not in paths:
            paths.add(key)
            kept.append(folder)
    return kept
