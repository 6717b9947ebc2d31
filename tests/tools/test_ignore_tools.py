"""glob, grep_search (ripgrep and the Python walk), list_directory and read_file skip what
.gitignore and .cairnignore exclude, on real files; a setting turns it off."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.tools.base import ToolContext, ToolResult
from cairn.tools.glob import GlobTool
from cairn.tools.grep import GrepTool
from cairn.tools.ignore import IgnoreRules
from cairn.tools.list_directory import ListDirectoryTool
from cairn.tools.read_file import ReadFileTool


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    files = {
        "src/app.py": "TOKEN = 1\n",
        "src/generated.py": "TOKEN = 2\n",
        "build/out.py": "TOKEN = 3\n",
        "debug.log": "TOKEN in a log\n",
        "secrets/key.txt": "TOKEN secret\n",
        "docs/notes.md": "TOKEN docs\n",
        "docs/draft/wip.md": "TOKEN draft\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("build/\n*.log\n/src/generated.py\n")
    (root / "docs" / ".gitignore").write_text("draft/\n")
    (root / ".cairnignore").write_text("secrets/\n")
    return root


def _ctx(workspace: Path, rules: IgnoreRules | None) -> ToolContext:
    return ToolContext(workspace=workspace, abort=AbortController().signal, ignore=rules)


def _text(result: ToolResult) -> str:
    return result.output if result.ok else str(result.error)


@pytest.fixture(params=["ripgrep", "python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    if request.param == "ripgrep":
        if shutil.which("rg") is None:
            pytest.skip("ripgrep (rg) is not installed")
    else:
        empty = tmp_path / "no-rg"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))
    return str(request.param)


async def test_grep_skips_ignored_files_with_either_engine(project: Path, engine: str) -> None:
    result = await GrepTool().execute({"pattern": "TOKEN"}, _ctx(project, IgnoreRules(project)))

    found = sorted(line.split(":")[0] for line in _text(result).splitlines()[1:])
    assert found == ["docs/notes.md", "src/app.py"]
    assert "build/out.py" not in _text(result) and "debug.log" not in _text(result)
    assert "secrets" not in _text(result) and "wip.md" not in _text(result)


async def test_grep_with_the_rules_off_finds_everything(project: Path, engine: str) -> None:
    off = IgnoreRules(project, gitignore=False, cairnignore=False)
    for rules in (None, off):
        result = await GrepTool().execute({"pattern": "TOKEN"}, _ctx(project, rules))
        for name in ("build/out.py", "debug.log", "secrets/key.txt", "docs/draft/wip.md"):
            assert name in _text(result), (rules, name)


async def test_naming_an_ignored_folder_searches_it(project: Path, engine: str) -> None:
    result = await GrepTool().execute(
        {"pattern": "TOKEN", "path": "build"}, _ctx(project, IgnoreRules(project))
    )

    assert "build/out.py:1:TOKEN = 3" in _text(result)


async def test_a_parent_folders_gitignore_counts_in_a_subfolder_workspace(
    project: Path, engine: str
) -> None:
    (project / "src" / "keep.log").write_text("TOKEN kept?\n")
    rules = IgnoreRules(project)  # the project root's rules, the workspace below it

    result = await GrepTool().execute({"pattern": "TOKEN"}, _ctx(project / "src", rules))

    assert "app.py" in _text(result)
    assert "keep.log" not in _text(result) and "generated.py" not in _text(result)


async def test_glob_skips_ignored_files(project: Path) -> None:
    result = await GlobTool().execute({"pattern": "**/*"}, _ctx(project, IgnoreRules(project)))

    listed = set(_text(result).splitlines()[1:])
    assert {"src/app.py", "docs/notes.md"} <= listed
    assert not listed & {"build/out.py", "debug.log", "secrets/key.txt", "src/generated.py"}
    assert "docs/draft/wip.md" not in listed

    everything = await GlobTool().execute({"pattern": "**/*.py"}, _ctx(project, None))
    assert "build/out.py" in _text(everything)


async def test_list_directory_leaves_ignored_entries_out_and_says_how_many(project: Path) -> None:
    result = await ListDirectoryTool().execute({"path": "."}, _ctx(project, IgnoreRules(project)))

    lines = _text(result).splitlines()
    assert "build/" not in lines and "secrets/" not in lines and "debug.log" not in lines
    assert "src/" in lines and "docs/" in lines
    assert lines[-1] == "[3 entries ignored by .gitignore or .cairnignore not shown.]"


async def test_read_file_refuses_cairnignored_files_but_reads_gitignored_ones(
    project: Path,
) -> None:
    ctx = _ctx(project, IgnoreRules(project))

    refused = await ReadFileTool().execute({"file_path": "secrets/key.txt"}, ctx)
    allowed = await ReadFileTool().execute({"file_path": "debug.log"}, ctx)

    assert refused.error is not None and ".cairnignore" in refused.error
    assert "TOKEN in a log" in _text(allowed)
