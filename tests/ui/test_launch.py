"""Starting the UI: a bad setup exits with a clear message before any terminal takeover."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from cairn.exit_codes import ExitCode
from cairn.ui import run_interactive


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cairn-home"
    home.mkdir()
    monkeypatch.setenv("CAIRN_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return home


def start(tmp_path: Path, **kwargs) -> tuple[int, str]:
    err = io.StringIO()
    options = {"model": None, "approval_mode": None, "resume": None, "continue_latest": False}
    options.update(kwargs)
    code = run_interactive(cwd=tmp_path, stderr=err, **options)
    return code, err.getvalue()


def test_no_endpoint_exits_41_with_the_setup_message(isolated, tmp_path):
    code, message = start(tmp_path)

    assert code == ExitCode.NO_AUTH == 41
    assert "No model endpoint is configured" in message


def test_broken_settings_exit_52_naming_the_file(isolated, tmp_path):
    (isolated / "settings.json").write_text('{"general": {"showSessionRecap": "yes"}}')

    code, message = start(tmp_path)

    assert code == ExitCode.CONFIG == 52
    assert "showSessionRecap" in message and "settings.json" in message


def test_unknown_resume_id_exits_42(isolated, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_MODEL", "m")

    code, message = start(tmp_path, resume="11111111-2222-4333-8444-555555555555")

    assert code == ExitCode.BAD_INPUT == 42
    assert 'No session found with ID "11111111-2222-4333-8444-555555555555".' in message


def test_importing_the_ui_package_does_not_import_textual():
    import subprocess

    code = "import cairn.ui, sys; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "False"
