"""The terminal UI's trust question, driven with Textual's pilot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Static

from cairn.config.trust import project_trust, trust_folder
from cairn.ui.trust import TrustApp

SIZE = (80, 24)  # small: every row and column drawn costs CPU in each redraw


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    root = tmp_path / "project"
    (root / ".cairn").mkdir(parents=True)
    (root / ".git").mkdir()
    hooks = {"Stop": [{"hooks": [{"type": "command", "command": "./ci/notify.sh --loud"}]}]}
    (root / ".cairn" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"db": {"command": "db-mcp"}}}))
    return root


def _shown(app: TrustApp) -> str:
    return "\n".join(str(widget.render()) for widget in app.query(Static))


@pytest.mark.parametrize(
    ("keys", "choice"), [(["1"], "trust"), (["2"], "decline"), (["q"], "quit")]
)
async def test_the_question_lists_every_command_and_returns_the_answer(
    project: Path, keys: list[str], choice: str
) -> None:
    app = TrustApp(project_trust(project))
    async with app.run_test(size=SIZE) as pilot:
        shown = _shown(app)
        assert "./ci/notify.sh --loud" in shown and "db-mcp" in shown
        assert "Do you trust this folder?" in shown
        await pilot.press(*keys)
        await pilot.pause()

    assert app.return_value == choice


async def test_enter_on_the_default_answer_does_not_trust(project: Path) -> None:
    app = TrustApp(project_trust(project))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await pilot.pause()

    assert app.return_value == "decline"


async def test_a_changed_folder_says_so(project: Path) -> None:
    trust_folder(project)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"db": {"command": "other"}}}))
    app = TrustApp(project_trust(project))
    async with app.run_test(size=SIZE):
        assert "changed since you trusted it" in _shown(app)


async def test_the_question_shows_control_characters_and_bidi_overrides_escaped(
    project: Path,
) -> None:
    """Regression (#24, low): a hook command with U+202E (and a terminal escape) was shown as
    it would read reversed (or run) rather than as written."""
    command = "echo \u202egnp.exe \x1b[2J"
    hooks = {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}
    (project / ".cairn" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    app = TrustApp(project_trust(project))
    async with app.run_test(size=SIZE):
        shown = _shown(app)

    assert "echo \\u202egnp.exe \\x1b[2J" in shown
    assert "\u202e" not in shown and "\x1b" not in shown
