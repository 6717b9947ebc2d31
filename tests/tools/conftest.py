"""Fixtures for the tool tests: a real workspace folder and a context over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.tools.base import ToolContext
from cairn.values import replace


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


@pytest.fixture
def abort() -> AbortController:
    return AbortController()


@pytest.fixture
def ctx(workspace: Path, abort: AbortController) -> ToolContext:
    return ToolContext(workspace=workspace, abort=abort.signal)


@pytest.fixture
def protected_ctx(workspace: Path, abort: AbortController) -> ToolContext:
    """A context whose ``pinned/`` folder is protected from writes (as for memory agents)."""
    return ToolContext(workspace=workspace, abort=abort.signal, protected_subdirs=("pinned",))


def with_deny_rules(ctx: ToolContext, tool: str, *rules: str) -> ToolContext:
    """``ctx`` as the scheduler hands it to ``tool`` when settings hold these deny rules."""
    from cairn.tools.permissions import PermissionRules

    return replace(ctx, path_rules=PermissionRules.parse(deny=rules), tool_name=tool)
