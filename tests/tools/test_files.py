"""How the file tools show paths."""

from __future__ import annotations

from pathlib import Path

from cairn.tools.files import display_path, folder_phrase


def test_display_path_is_workspace_relative_or_absolute(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"

    assert display_path(workspace.resolve() / "src" / "a.py", workspace) == "src/a.py"
    assert display_path(workspace.resolve(), workspace) == "."
    assert display_path(Path("/etc/hosts"), workspace) == "/etc/hosts"
    assert folder_phrase(".") == "the workspace"
