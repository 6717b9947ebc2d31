"""The session gives its file tools the project's ignore rules, as the settings say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import Settings
from cairn.content import FunctionResponse
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest
from cairn.testing import ScriptedProvider, reply, tool_call
from cairn.vocabulary import SessionEvent


async def _glob_result(project: Path, **settings: Any) -> str:
    provider = ScriptedProvider(reply("Done."))
    provider.enqueue(tool_call("glob", {"pattern": "**/*.txt"}), reply("Listed."))
    runtime = Runtime(
        cwd=project,
        settings=Settings.model_validate(
            {"memory": {"enableManagedAutoMemory": False}, **settings}
        ),
        provider=provider,
    )
    session = runtime.new_session()

    async def ignore(event: SessionEvent) -> None:
        return None

    try:
        await session.prompt(PromptRequest("find the text files"), ignore)
    finally:
        await session.close()
        await runtime.aclose()
    last = provider.requests_for("main")[-1]
    [response] = [p for c in last.contents for p in c.parts if isinstance(p, FunctionResponse)]
    return str(response.response)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / ".cairnignore").write_text("private.txt\n")
    for name in ("kept.txt", "ignored.txt", "private.txt"):
        (root / name).write_text(name)
    return root


async def test_file_tools_skip_ignored_files_by_default(project: Path) -> None:
    result = await _glob_result(project)

    assert "kept.txt" in result
    assert "ignored.txt" not in result and "private.txt" not in result


async def test_the_settings_turn_each_rule_off(project: Path) -> None:
    both_off = {
        "context": {"fileFiltering": {"respectGitIgnore": False, "respectCairnIgnore": False}}
    }
    git_off = {"context": {"fileFiltering": {"respectGitIgnore": False}}}

    everything = await _glob_result(project, **both_off)
    only_cairn = await _glob_result(project, **git_off)

    assert "ignored.txt" in everything and "private.txt" in everything
    assert "ignored.txt" in only_cairn and "private.txt" not in only_cairn
