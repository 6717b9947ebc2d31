"""Fixtures and files shared by the Forget tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.memory.manager import MemoryManager

from ..memory_helpers import make_manager, project_root

LEGACY_BODY = """# Feedback

- Use uv, never pip
  Why: the lock file is uv.lock
- Prefer pytest over unittest
  How to apply: every new test
- Keep commits small
"""


@pytest.fixture
def manager(tmp_path: Path) -> MemoryManager:
    return make_manager(tmp_path)


@pytest.fixture
def root(manager: MemoryManager) -> Path:
    return project_root(manager)


def selected_ids(answer: list[str]) -> str:
    """A forget selector answer naming ``answer``."""
    return json.dumps({"selected_ids": answer})


def write_legacy(root: Path) -> Path:
    """A legacy multi-entry feedback file with three entries."""
    path = root / "feedback.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = "---\nname: Feedback\ndescription: collected feedback\ntype: feedback\n---\n\n"
    path.write_text(head + LEGACY_BODY)
    return path
