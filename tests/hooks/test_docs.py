"""The settings and hook scripts shown in docs/hooks.md, run as written."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from cairn.config.settings import HooksSettings
from cairn.hooks import HookRunner

DOC = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"
_FENCE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
_SCRIPT_NAME = re.compile(r"^# (\.cairn/hooks/[\w.-]+)$", re.MULTILINE)

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("jq", "git", "make")),
    reason="the documented hooks use jq, git and make",
)


def _blocks(language: str) -> list[str]:
    return [body for lang, body in _FENCE.findall(DOC.read_text()) if lang == language]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git project holding the documented hook scripts."""
    subprocess.run(["git", "init", "-q", "-b", "feature-x", str(tmp_path)], check=True)
    for body in _blocks("bash"):
        name = _SCRIPT_NAME.search(body)
        assert name, "every bash example in docs/hooks.md names its file"
        path = tmp_path / name.group(1)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return tmp_path


@pytest.fixture
def runner(project: Path) -> HookRunner:
    settings_json = next(block for block in _blocks("json") if "guard-shell" in block)
    hooks = HooksSettings.model_validate(json.loads(settings_json)["hooks"])
    environ = {"PATH": os.environ["PATH"], "HOME": str(project)}
    return HookRunner(hooks, cwd=project, session_id="docs", environ=environ)


async def _shell(runner: HookRunner, command: str, tool_name: str = "run_shell_command"):
    return await runner.pre_tool_use(
        tool_name=tool_name,
        tool_input={"command": command},
        tool_use_id="c1",
        permission_mode="default",
    )


async def test_guard_shell_example_denies_rm_rf(runner):
    outcome = await _shell(runner, "rm -rf build")

    assert outcome.decision == "deny"
    assert outcome.reason is not None
    assert outcome.reason.startswith("rm -rf is not allowed")


async def test_guard_shell_example_allows_other_commands_and_tools(runner):
    assert (await _shell(runner, "ls -la")).decision is None
    assert (await _shell(runner, "rm -rf x", tool_name="write_file")).decision is None


async def test_add_branch_example_adds_the_branch_as_context(runner):
    outcome = await runner.user_prompt_submit("hi")

    assert outcome.warnings == []
    assert outcome.additional_context == "Current git branch: feature-x"


async def test_tests_must_pass_example_blocks_the_stop_while_tests_fail(runner, project):
    (project / "Makefile").write_text("test:\n\t@echo '3 failed'; exit 1\n")

    outcome = await runner.stop(last_assistant_message="Done.")

    assert outcome.blocked
    assert outcome.reason is not None
    assert outcome.reason.startswith("The tests fail. Fix them before finishing:\n")
    assert "3 failed" in outcome.reason


async def test_tests_must_pass_example_lets_the_agent_stop_when_tests_pass(runner, project):
    (project / "Makefile").write_text("test:\n\t@echo ok\n")

    outcome = await runner.stop(last_assistant_message="Done.")

    assert not outcome.blocked
    assert outcome.warnings == []
