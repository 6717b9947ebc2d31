"""Unusable settings files stop `cairn -p` with exit 52 and one message, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.exit_codes import ExitCode
from cairn.testing import ScriptedServer

from .conftest import RunCairn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def _write(project: Path, content: bytes) -> Path:
    path = project / ".cairn" / "settings.json"
    path.unlink()
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"a": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "nested more than 64 levels"),
        (b'{"model": {"name": "caf\xe9"}}', "not UTF-8 text"),
        (b'{"x": ' + b"7" * 5000 + b"}", "5000 digits is too long"),
        (b'{"tools": {"shellTimeoutSeconds": NaN}}', "NaN is not a JSON number"),
    ],
)
def test_a_malformed_settings_file_exits_52_with_a_message(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    content: bytes,
    message: str,
) -> None:
    """Regression (#18): these crashed with exit 1 instead of the documented exit 52."""
    path = _write(project, content)

    done = run_cairn("-p", "hi")

    assert done.returncode == ExitCode.CONFIG, done.stderr
    assert str(path) in done.stderr and message in done.stderr
    assert "Traceback" not in done.stderr
    assert scripted_server.requests == []


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_settings_path_that_is_not_a_file_is_reported(
    run_cairn: RunCairn, project: Path, kind: str
) -> None:
    """Regression (#18): a settings.json that was a folder or a FIFO was silently ignored (a
    FIFO must not hang start-up either)."""
    path = project / ".cairn" / "settings.json"
    path.unlink()
    if kind == "folder":
        path.mkdir()
    else:
        os.mkfifo(path)

    done = run_cairn("-p", "hi", timeout=60)

    assert done.returncode == ExitCode.CONFIG, done.stderr
    assert "settings must be a regular file" in done.stderr
    assert "Traceback" not in done.stderr
