"""The ``script`` fixture: real bash hook scripts in tmp_path."""

from __future__ import annotations

import shlex
import stat
from pathlib import Path

import pytest

from .helpers import ScriptFactory


@pytest.fixture
def script(tmp_path: Path) -> ScriptFactory:
    """Write a bash script with ``body`` and return the command that runs it."""
    counter = iter(range(1_000_000))

    def make(body: str) -> str:
        path = tmp_path / "hooks" / f"hook_{next(counter)}.sh"
        path.parent.mkdir(exist_ok=True)
        path.write_text("#!/usr/bin/env bash\n" + body + "\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return shlex.quote(str(path))

    return make
