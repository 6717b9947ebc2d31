"""Broken memory folders never break a turn: real ``cairn`` processes on hostile files (#18)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply

from .conftest import RunCairn, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

MEMORY = (
    "---\nname: Deploy with make\ndescription: how the billing service is deployed\n"
    "type: project\n---\n\nRun `make release`.\n"
)


@pytest.fixture
def memory(project: Path, cairn_env: dict[str, str]) -> Path:
    """Managed memory on, kept in the project (``CAIRN_MEMORY_LOCAL=1``), with one memory."""
    write_settings(project, {"memory": {"enableManagedAutoMemory": True}})
    cairn_env["CAIRN_MEMORY_LOCAL"] = "1"
    root = project / ".cairn" / "memory"
    (root / "project").mkdir(parents=True)
    (root / "project" / "deploy.md").write_text(MEMORY)
    return root


def _bad_name(folder: Path) -> Path:
    path = Path(os.fsdecode(os.fsencode(folder) + b"/d\xe9ploy.md"))
    path.write_text(MEMORY)
    return path


def test_a_non_utf8_memory_file_name_leaves_cairn_p_working(
    memory: Path, run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Regression (#18): one such file name made every `cairn -p` turn fail."""
    _bad_name(memory / "project")
    scripted_server.default = reply("Nothing to save.")
    scripted_server.enqueue(reply("Use make release."), purpose="main")
    done = run_cairn("-p", "how do we deploy billing?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Use make release."
    [main] = scripted_server.requests_for("main")
    assert "Deploy with make" in (main.system or "")


def test_a_non_utf8_memory_file_name_is_one_reindex_warning(
    memory: Path, run_cairn: RunCairn
) -> None:
    """Regression (#18): `cairn memory reindex` failed with UnicodeEncodeError."""
    _bad_name(memory / "project")
    done = run_cairn("memory", "reindex")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stdout.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {memory / 'project'}/d\\xe9ploy.md: skipped (the file name is not valid UTF-8)"
    ]
    assert "Indexed 1 memory" in done.stdout
    assert (memory / "MEMORY.md").read_text().startswith("- [Deploy with make](project/deploy.md)")


def test_a_fifo_at_memory_md_does_not_hang_cairn_p(
    memory: Path, run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Regression (#18): `MEMORY.md` as a FIFO hung every prompt."""
    os.mkfifo(memory / "MEMORY.md")
    scripted_server.default = reply("Nothing to save.")
    scripted_server.enqueue(reply("Use make release."), purpose="main")
    done = run_cairn("-p", "how do we deploy billing?", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Use make release."
    [main] = scripted_server.requests_for("main")
    assert "- [Deploy with make](project/deploy.md)" in (main.system or "")
