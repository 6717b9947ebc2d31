from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.tools._grep_worker import MAX_WHOLE_FILE_BYTES
from cairn.tools.base import ToolContext
from cairn.tools.grep import MAX_GREP_MATCHES, MAX_MATCH_LINE_CHARS, GrepTool
from cairn.values import replace

from .conftest import with_deny_rules

tool = GrepTool()
HAS_RG = shutil.which("rg") is not None


@pytest.fixture
def without_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH on which rg cannot be found, so the Python search runs."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.fixture
def tree(workspace: Path) -> Path:
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (workspace / "src" / "pkg" / "util.py").write_text("def helper():\n    return 'main'\n")
    (workspace / "README.md").write_text("# Demo\nRun main() to start.\n")
    (workspace / "logo.png").write_bytes(b"\x89PNG\x00\x00main\x00")
    (workspace / "node_modules" / "dep").mkdir(parents=True)
    (workspace / "node_modules" / "dep" / "index.js").write_text("main();\n")
    return workspace


def match_lines(output: str | None) -> list[str]:
    assert output is not None
    return [line for line in output.splitlines()[1:] if not line.startswith("[")]


@pytest.mark.usefixtures("without_rg")
class TestPythonSearch:
    async def test_matches_are_path_line_text_in_path_order(
        self, tree: Path, ctx: ToolContext
    ) -> None:
        result = await tool.execute({"pattern": r"main"}, ctx)

        assert match_lines(result.output) == [
            "README.md:2:Run main() to start.",
            "src/app.py:3:def main():",
            "src/pkg/util.py:2:    return 'main'",
        ]

    async def test_skips_binary_files_and_dependency_folders(
        self, tree: Path, ctx: ToolContext
    ) -> None:
        result = await tool.execute({"pattern": "main"}, ctx)

        assert result.output is not None
        assert "logo.png" not in result.output
        assert "node_modules" not in result.output

    async def test_glob_without_a_slash_matches_file_names_at_any_depth(
        self, tree: Path, ctx: ToolContext
    ) -> None:
        result = await tool.execute({"pattern": "return", "glob": "*.py"}, ctx)

        assert match_lines(result.output) == [
            "src/app.py:4:    return os.getcwd()",
            "src/pkg/util.py:2:    return 'main'",
        ]

    async def test_glob_with_a_slash_is_relative_to_the_search_path(
        self, tree: Path, ctx: ToolContext
    ) -> None:
        result = await tool.execute({"pattern": "return", "path": "src", "glob": "pkg/*.py"}, ctx)

        assert match_lines(result.output) == ["src/pkg/util.py:2:    return 'main'"]

    async def test_path_may_name_a_single_file(self, tree: Path, ctx: ToolContext) -> None:
        result = await tool.execute({"pattern": "os", "path": "src/app.py"}, ctx)

        assert match_lines(result.output) == [
            "src/app.py:1:import os",
            "src/app.py:4:    return os.getcwd()",
        ]

    async def test_inline_flag_makes_the_search_case_insensitive(
        self, tree: Path, ctx: ToolContext
    ) -> None:
        result = await tool.execute({"pattern": "(?i)DEMO"}, ctx)

        assert match_lines(result.output) == ["README.md:1:# Demo"]

    async def test_invalid_regex_is_a_clear_error(self, tree: Path, ctx: ToolContext) -> None:
        result = await tool.execute({"pattern": "main("}, ctx)

        assert result.error is not None
        assert result.error.startswith("Invalid regular expression 'main('")

    async def test_no_match_says_so(self, tree: Path, ctx: ToolContext) -> None:
        result = await tool.execute({"pattern": "zebra"}, ctx)

        assert result.output == "No matches found for pattern 'zebra' in the workspace."

    async def test_matches_are_capped_with_a_note(self, workspace: Path, ctx: ToolContext) -> None:
        (workspace / "many.txt").write_text("hit\n" * (MAX_GREP_MATCHES + 50))

        result = await tool.execute({"pattern": "hit"}, ctx)

        assert result.output is not None
        assert len(match_lines(result.output)) == MAX_GREP_MATCHES
        assert f"[Showing the first {MAX_GREP_MATCHES} matches; there are more." in result.output

    async def test_long_matching_lines_are_shortened(
        self, workspace: Path, ctx: ToolContext
    ) -> None:
        (workspace / "min.js").write_text("needle" + "z" * 5000 + "\n")

        result = await tool.execute({"pattern": "needle"}, ctx)

        (line,) = match_lines(result.output)
        assert len(line) < MAX_MATCH_LINE_CHARS + 30

    async def test_crlf_line_endings_are_not_part_of_the_text(
        self, workspace: Path, ctx: ToolContext
    ) -> None:
        (workspace / "win.txt").write_bytes(b"first\r\nsecond\r\n")

        result = await tool.execute({"pattern": "second$"}, ctx)

        assert match_lines(result.output) == ["win.txt:2:second"]

    async def test_files_too_large_to_read_at_once_are_searched_line_by_line(
        self, workspace: Path, ctx: ToolContext
    ) -> None:
        filler = b"x" * 99 + b"\n"
        repeats = MAX_WHOLE_FILE_BYTES // len(filler) + 1
        with (workspace / "huge.log").open("wb") as handle:
            handle.write(b"first needle\r\n")
            handle.write(filler * repeats)
            handle.write(b"last needle")

        result = await tool.execute({"pattern": "needle$"}, ctx)

        assert match_lines(result.output) == [
            "huge.log:1:first needle",
            f"huge.log:{repeats + 2}:last needle",
        ]

    @pytest.mark.parametrize(
        ("pattern", "expected"),
        [
            (r"(?<!\s)b", ["x.txt:2:b"]),
            (r"a(?!\s)", ["x.txt:1:a"]),
            (r"\Ab", ["x.txt:2:b"]),
            (r"^$", ["x.txt:3:"]),
        ],
    )
    async def test_anchors_and_lookarounds_see_one_line_at_a_time(
        self, workspace: Path, ctx: ToolContext, pattern: str, expected: list[str]
    ) -> None:
        (workspace / "x.txt").write_text("a\nb\n\n")

        result = await tool.execute({"pattern": pattern}, ctx)

        assert match_lines(result.output) == expected

    async def test_missing_path_is_an_error(self, ctx: ToolContext) -> None:
        result = await tool.execute({"pattern": "x", "path": "nope"}, ctx)

        assert result.error == "Path not found: nope"

    async def test_search_outside_the_workspace_is_refused(self, ctx: ToolContext) -> None:
        result = await tool.execute({"pattern": "root", "path": "/etc"}, ctx)

        assert result.error is not None
        assert "outside" in result.error


@pytest.mark.skipif(not HAS_RG, reason="ripgrep (rg) is not installed")
@pytest.mark.parametrize(
    "args",
    [
        {"pattern": "main"},
        {"pattern": "return", "glob": "*.py"},
        {"pattern": "os", "path": "src/app.py"},
        {"pattern": "return", "path": "src"},
    ],
)
async def test_ripgrep_and_python_searches_give_the_same_output(
    tree: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, args: dict[str, str]
) -> None:
    with_rg = await tool.execute(args, ctx)
    monkeypatch.setenv("PATH", os.devnull)
    without = await tool.execute(args, ctx)

    assert with_rg.output == without.output


@pytest.fixture(params=["rg", "python"])
def searcher(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """Each test below runs with ripgrep and with the Python search."""
    if request.param == "rg" and not HAS_RG:
        pytest.skip("ripgrep (rg) is not installed")
    if request.param == "python":
        empty = tmp_path / "empty-bin"
        empty.mkdir()
        monkeypatch.setenv("PATH", str(empty))
    return str(request.param)


def worker_running(marker: str, workspace: Path) -> bool:
    """Whether a search process in ``workspace`` whose command line holds ``marker`` is still
    alive (the folder tells this test's search from another test's running in parallel)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z" and cwd == str(workspace):
            return True
    return False


async def test_a_file_symlink_out_of_the_workspace_is_not_searched(
    searcher: str, workspace: Path, tmp_path: Path, ctx: ToolContext
) -> None:
    """Regression (#18): grep_search followed file symlinks out of the workspace and printed
    their content."""
    (tmp_path / "secret.txt").write_text("password=hunter2\n")
    (workspace / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "inside.txt").write_text("password=placeholder\n")

    result = await tool.execute({"pattern": "password"}, ctx)

    assert result.output is not None
    assert "hunter2" not in result.output
    assert "inside.txt:1:password=placeholder" in result.output


async def test_read_deny_rules_hide_the_files_they_cover(
    searcher: str, workspace: Path, ctx: ToolContext
) -> None:
    """Regression (#18): grep_search printed lines from a folder under a `Read(secret/**)`
    deny rule."""
    (workspace / "secret").mkdir()
    (workspace / "secret" / "keys.txt").write_text("token=abc\n")
    (workspace / "app.txt").write_text("token=placeholder\n")
    guarded = with_deny_rules(ctx, "grep_search", "Read(secret/**)")

    result = await tool.execute({"pattern": "token"}, guarded)

    assert result.output is not None
    assert "abc" not in result.output and "secret/" not in result.output
    assert "app.txt:1:token=placeholder" in result.output


async def test_a_catastrophic_pattern_is_stopped_when_its_time_is_up(
    searcher: str, workspace: Path, ctx: ToolContext
) -> None:
    """Regression (#18): grep_search with `(a+)+$` hung and could not be cancelled.

    ripgrep's engine is linear and simply finishes; the Python search backtracks and is
    stopped at the time budget, its process killed."""
    (workspace / "slow.uniq").write_text("a" * 40 + "b\n")
    # ripgrep gets time to spare on a busy machine; the Python search gets one second
    quick = replace(ctx, search_timeout=30.0 if searcher == "rg" else 1.0)

    result = await tool.execute({"pattern": "(a+)+$", "glob": "*.uniq"}, quick)

    if searcher == "rg":
        assert result.output is not None and result.output.startswith("No matches")
    else:
        assert result.error is not None and "stopped after 1 s" in result.error, result
        assert "(a+)+" in result.error
    assert not worker_running('"*.uniq"', workspace)


async def test_cancelling_the_turn_kills_a_running_search(
    workspace: Path, ctx: ToolContext, abort: AbortController, without_rg: None
) -> None:
    (workspace / "slow.cancel").write_text("a" * 40 + "b\n")
    running = asyncio.create_task(tool.execute({"pattern": "(a+)+$", "glob": "*.cancel"}, ctx))
    while not worker_running('"*.cancel"', workspace):
        await asyncio.sleep(0.02)

    abort.abort("user pressed Ctrl+C")
    result = await running

    assert result.error is not None and "cancelled" in result.error
    assert not worker_running('"*.cancel"', workspace)


async def test_a_cancelled_task_kills_the_search_process(
    workspace: Path, ctx: ToolContext, without_rg: None
) -> None:
    (workspace / "slow.task").write_text("a" * 40 + "b\n")
    running = asyncio.create_task(tool.execute({"pattern": "(a+)+$", "glob": "*.task"}, ctx))
    while not worker_running('"*.task"', workspace):
        await asyncio.sleep(0.02)

    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    assert not worker_running('"*.task"', workspace)


async def test_a_fifo_is_refused_as_a_target_and_skipped_in_a_folder(
    searcher: str, workspace: Path, ctx: ToolContext
) -> None:
    """A FIFO would block the search forever (#18's FIFO finding, for grep_search)."""
    os.mkfifo(workspace / "pipe")
    (workspace / "file.txt").write_text("needle\n")

    direct = await tool.execute({"pattern": "needle", "path": "pipe"}, ctx)
    folder = await tool.execute({"pattern": "needle"}, ctx)

    assert direct.error is not None and "FIFO" in direct.error
    assert folder.output is not None and "file.txt:1:needle" in folder.output


def test_the_title_names_the_pattern_and_the_folder_when_one_is_given() -> None:
    assert GrepTool().title({"pattern": "TODO", "path": "src"}) == "Search for TODO in src"
    assert GrepTool().title({"pattern": "TODO"}) == "Search for TODO"
