from __future__ import annotations

import os
from pathlib import Path

from cairn.tools.base import ToolContext
from cairn.tools.glob import MAX_GLOB_RESULTS, GlobTool

from .conftest import with_deny_rules

tool = GlobTool()


def touch(path: Path, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")
    os.utime(path, (mtime, mtime))


def listed_paths(output: str | None) -> list[str]:
    assert output is not None
    return [line for line in output.splitlines()[1:] if not line.startswith("[")]


async def test_double_star_matches_at_any_depth_newest_first(
    workspace: Path, ctx: ToolContext
) -> None:
    touch(workspace / "a.py", 1_000)
    touch(workspace / "src" / "b.py", 3_000)
    touch(workspace / "src" / "deep" / "c.py", 2_000)
    touch(workspace / "src" / "notes.md", 4_000)

    result = await tool.execute({"pattern": "**/*.py"}, ctx)

    assert listed_paths(result.output) == ["src/b.py", "src/deep/c.py", "a.py"]


async def test_single_star_stays_in_one_folder(workspace: Path, ctx: ToolContext) -> None:
    touch(workspace / "a.py", 1_000)
    touch(workspace / "src" / "b.py", 2_000)

    result = await tool.execute({"pattern": "*.py"}, ctx)

    assert listed_paths(result.output) == ["a.py"]


async def test_path_narrows_the_search_and_results_stay_workspace_relative(
    workspace: Path, ctx: ToolContext
) -> None:
    touch(workspace / "a.py", 1_000)
    touch(workspace / "src" / "b.py", 2_000)

    result = await tool.execute({"pattern": "*.py", "path": "src"}, ctx)

    assert listed_paths(result.output) == ["src/b.py"]


async def test_brace_alternatives_match_each_extension(workspace: Path, ctx: ToolContext) -> None:
    touch(workspace / "a.ts", 1_000)
    touch(workspace / "b.tsx", 2_000)
    touch(workspace / "c.js", 3_000)

    result = await tool.execute({"pattern": "*.{ts,tsx}"}, ctx)

    assert listed_paths(result.output) == ["b.tsx", "a.ts"]


async def test_skips_vcs_dependency_and_cache_folders(workspace: Path, ctx: ToolContext) -> None:
    for folder in (".git", "node_modules", ".venv", "__pycache__"):
        touch(workspace / folder / "x.py", 5_000)
    touch(workspace / "kept.py", 1_000)

    result = await tool.execute({"pattern": "**/*.py"}, ctx)

    assert listed_paths(result.output) == ["kept.py"]


async def test_results_are_capped_with_a_note_giving_the_total(
    workspace: Path, ctx: ToolContext
) -> None:
    total = MAX_GLOB_RESULTS + 20
    for n in range(total):
        touch(workspace / f"f{n:04}.txt", 1_000 + n)

    result = await tool.execute({"pattern": "*.txt"}, ctx)

    assert result.output is not None
    paths = listed_paths(result.output)
    assert len(paths) == MAX_GLOB_RESULTS
    assert paths[0] == f"f{total - 1:04}.txt"
    assert f"[Showing the {MAX_GLOB_RESULTS} newest of {total} matches." in result.output


async def test_no_match_says_so(workspace: Path, ctx: ToolContext) -> None:
    result = await tool.execute({"pattern": "*.rs"}, ctx)

    assert result.output == 'No files found matching "*.rs" in the workspace.'


async def test_absolute_pattern_inside_the_search_folder_is_accepted(
    workspace: Path, ctx: ToolContext
) -> None:
    touch(workspace / "src" / "b.py", 1_000)

    result = await tool.execute({"pattern": f"{workspace.resolve()}/src/*.py"}, ctx)

    assert listed_paths(result.output) == ["src/b.py"]


async def test_search_outside_the_workspace_is_refused(ctx: ToolContext) -> None:
    result = await tool.execute({"pattern": "*", "path": "/etc"}, ctx)

    assert result.error is not None
    assert "outside" in result.error


async def test_files_the_context_may_not_read_are_not_listed(
    workspace: Path, tmp_path: Path, ctx: ToolContext
) -> None:
    """Every file tool goes through one path check (#18): a symlink out of the workspace and a
    file under a Read(...) deny rule are not listed."""
    (tmp_path / "outside.py").write_text("x\n")
    (workspace / "link.py").symlink_to(tmp_path / "outside.py")
    (workspace / "secret").mkdir()
    (workspace / "secret" / "keys.py").write_text("k\n")
    (workspace / "app.py").write_text("a\n")
    guarded = with_deny_rules(ctx, "glob", "Read(secret/**)")

    result = await tool.execute({"pattern": "**/*.py"}, guarded)

    assert result.output is not None
    assert result.output.splitlines()[1:] == ["app.py"]


def test_the_title_names_the_pattern_and_the_folder_when_one_is_given() -> None:
    assert GlobTool().title({"pattern": "**/*.py", "path": "src"}) == "Find **/*.py in src"
    assert GlobTool().title({"pattern": "*.md"}) == "Find *.md"
