"""A memory document: one Markdown file with YAML front matter (name, description, type).

The on-disk format is the reference system's, so memories written by Qwen Code or Claude Code read
as is::

    ---
    name: Prefers uv over pip
    description: The user installs Python packages with uv, never pip
    type: user
    ---

    Use `uv pip install` in this user's projects.

    Why: they pin everything with uv.lock.
    How to apply: any install or dependency change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypeAlias

from cairn.values import Value
from cairn.vocabulary.events import MemoryRef

__all__ = ["MEMORY_TYPES", "MemoryDoc", "MemoryScope", "MemoryType", "Staleness"]

MemoryType: TypeAlias = Literal["user", "feedback", "project", "reference"]
MemoryScope: TypeAlias = Literal["project", "user"]
MEMORY_TYPES: tuple[MemoryType, ...] = ("user", "feedback", "project", "reference")


class Staleness(Value):
    """Why a memory may no longer hold (its evidence changed), or cannot be checked."""

    state: Literal["stale", "unverifiable"]
    note: str  # "learned on 2026-03-02 from src/x.py, which has changed since"
    files: tuple[str, ...] = ()  # the evidence files concerned (workspace-relative)

    @property
    def label(self) -> str:
        """A few words for lists and front ends."""
        return "possibly stale" if self.state == "stale" else "cannot verify"


class MemoryDoc(Value):
    path: Path  # absolute
    relative_path: str  # POSIX, relative to its root ("feedback/uv.md")
    scope: MemoryScope
    type: MemoryType
    title: str  # front matter `name` (falls back to `title`, then the type)
    description: str
    body: str  # trimmed Markdown body
    mtime: float  # seconds since the epoch
    size: int
    staleness: Staleness | None = None  # set by Recall's evidence check on the copy it delivers

    @property
    def ref(self) -> MemoryRef:
        """This memory as front ends show it (name, file, and a stale mark)."""
        note = f"{self.staleness.label}: {self.staleness.note}" if self.staleness else ""
        return MemoryRef(self.title, self.scope, self.relative_path, str(self.path), note)

    @property
    def pinned(self) -> bool:
        """Hand-curated files under ``pinned/``: read by Recall, never written by agents."""
        return self.relative_path.split("/", 1)[0] == "pinned"
