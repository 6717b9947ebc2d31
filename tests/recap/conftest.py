"""A real runtime on the scripted model server, in an isolated CAIRN_HOME."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cairn.session.runtime import Runtime
from cairn.testing import ScriptedServer, reply

from .helpers import make_runtime


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cairn_home = tmp_path / "cairn-home"
    monkeypatch.setenv("CAIRN_HOME", str(cairn_home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CAIRN_DEBUG_LOG_FILE", raising=False)
    return cairn_home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
async def runtime(
    scripted_server: ScriptedServer, workspace: Path, home: Path
) -> AsyncIterator[Runtime]:
    scripted_server.default = reply("ok")
    rt = make_runtime(scripted_server, workspace)
    yield rt
    await rt.aclose()
