"""Fixtures for the in-process ACP agent tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (a git root) with cairn's home and memory in tmp_path."""
    home = tmp_path / "cairn-home"
    home.mkdir()
    monkeypatch.setenv("CAIRN_HOME", str(home))
    monkeypatch.setenv("CAIRN_MEMORY_LOCAL", "1")
    monkeypatch.delenv("CAIRN_MEMORY_BASE_DIR", raising=False)
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder
