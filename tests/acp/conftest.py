"""Fixtures for the in-process ACP agent tests.

The test modules here import the ACP SDK at module level; it is imported first the way
``cairn --acp`` imports it (:func:`cairn.acp._sdk.import_sdk`), which costs each test process
a fraction of an ordinary ``import acp`` and gives the tests the SDK as cairn runs it.
tests/acp/test_acp_sdk.py compares the two imports in processes of their own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.acp._sdk import import_sdk

import_sdk()


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
