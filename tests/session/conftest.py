"""A real Runtime and Session over the in-process scripted provider, in an isolated cairn home."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import Settings
from cairn.llm.types import Provider
from cairn.session.runtime import Runtime
from cairn.testing import ScriptedProvider, reply

from .helpers import ANSWER, MakeWorld, World


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git project, with the cairn home and memory base under tmp_path."""
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.setenv("CAIRN_MEMORY_LOCAL", "1")  # project memory in <project>/.cairn/memory
    monkeypatch.delenv("CAIRN_MEMORY_BASE_DIR", raising=False)
    monkeypatch.delenv("CAIRN_MEMORY_PROJECT_SCOPE", raising=False)
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


@pytest.fixture
async def make_world(project: Path) -> AsyncIterator[MakeWorld]:
    """``make_world(memory=False, provider=None, **settings)``: a runtime on ``project``."""
    worlds: list[World] = []

    def make(*, memory: bool = False, provider: Provider | None = None, **settings: Any) -> World:
        settings.setdefault("memory", {})["enableManagedAutoMemory"] = memory
        scripted = ScriptedProvider(reply(ANSWER))
        runtime = Runtime(
            cwd=project, settings=Settings.model_validate(settings), provider=provider or scripted
        )
        world = World(project, runtime, scripted)
        worlds.append(world)
        return world

    yield make
    for world in worlds:
        await world.close()
