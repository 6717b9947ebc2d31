"""ToolContext.resolve (which paths a tool may touch) and ToolResult.to_response."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.content import FunctionCall, FunctionResponse
from cairn.tools.base import PathOutsideWorkspace, ToolContext, ToolError, ToolResult

# ----- ToolContext.resolve: the workspace -----


def test_a_relative_path_resolves_inside_the_workspace(ctx: ToolContext, workspace: Path) -> None:
    assert ctx.resolve("src/app.py") == workspace.resolve() / "src" / "app.py"


def test_an_absolute_path_inside_the_workspace_is_allowed(
    ctx: ToolContext, workspace: Path
) -> None:
    target = workspace / "README.md"

    assert ctx.resolve(str(target), write=True) == target.resolve()


def test_the_workspace_itself_is_allowed(ctx: ToolContext, workspace: Path) -> None:
    assert ctx.resolve(".") == workspace.resolve()


def test_dot_dot_that_stays_inside_the_workspace_is_allowed(
    ctx: ToolContext, workspace: Path
) -> None:
    assert ctx.resolve("src/../notes.md") == workspace.resolve() / "notes.md"


@pytest.mark.parametrize("raw", ["/etc/passwd", "../secret.txt", "src/../../secret.txt"])
@pytest.mark.parametrize("write", [False, True])
def test_paths_outside_the_workspace_are_refused(ctx: ToolContext, raw: str, write: bool) -> None:
    with pytest.raises(PathOutsideWorkspace, match="path is outside the allowed directories") as e:
        ctx.resolve(raw, write=write)

    assert str(e.value).startswith(f"{raw}: ")


def test_a_sibling_folder_sharing_the_workspace_name_prefix_is_outside(
    ctx: ToolContext, workspace: Path
) -> None:
    sibling = workspace.parent / f"{workspace.name}-evil"
    sibling.mkdir()

    with pytest.raises(PathOutsideWorkspace):
        ctx.resolve(str(sibling / "a.txt"))


def test_a_symlink_leading_out_of_the_workspace_is_refused(
    ctx: ToolContext, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (workspace / "escape").symlink_to(outside, target_is_directory=True)

    with pytest.raises(PathOutsideWorkspace):
        ctx.resolve("escape/secret.txt")
    with pytest.raises(PathOutsideWorkspace):
        ctx.resolve("escape/new.txt", write=True)


def test_a_symlink_within_the_workspace_resolves_to_its_target(
    ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to(workspace / "real", target_is_directory=True)

    assert ctx.resolve("alias/a.txt") == workspace.resolve() / "real" / "a.txt"


def test_home_relative_paths_are_expanded_before_the_check(
    ctx: ToolContext, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(workspace))

    assert ctx.resolve("~/notes.md") == workspace.resolve() / "notes.md"


@pytest.mark.parametrize("raw", ["", "   "])
def test_an_empty_path_is_an_error(ctx: ToolContext, raw: str) -> None:
    with pytest.raises(ToolError, match="a path is required"):
        ctx.resolve(raw)


# ----- ToolContext.resolve: other roots -----


@pytest.fixture
def memory_root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    (root / "pinned").mkdir(parents=True)
    return root


def _context(
    workspace: Path,
    *,
    writable_roots: Sequence[Path] | None = None,
    readable_roots: Sequence[Path] | None = None,
    protected_subdirs: Sequence[str] = (),
) -> ToolContext:
    return ToolContext(
        workspace=workspace,
        abort=AbortController().signal,
        writable_roots=writable_roots,
        readable_roots=readable_roots,
        protected_subdirs=protected_subdirs,
    )


def test_writable_roots_replace_the_workspace_for_writes(
    workspace: Path, memory_root: Path
) -> None:
    ctx = _context(workspace, writable_roots=[memory_root])

    assert ctx.resolve(str(memory_root / "user" / "a.md"), write=True) == (
        memory_root.resolve() / "user" / "a.md"
    )
    with pytest.raises(PathOutsideWorkspace):
        ctx.resolve("src/app.py", write=True)


def test_writable_roots_are_readable_along_with_the_workspace(
    workspace: Path, memory_root: Path
) -> None:
    ctx = _context(workspace, writable_roots=[memory_root])

    assert ctx.resolve("src/app.py") == workspace.resolve() / "src" / "app.py"
    assert ctx.resolve(str(memory_root / "a.md")) == memory_root.resolve() / "a.md"


def test_readable_roots_limit_reads_to_those_roots(workspace: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    ctx = _context(workspace, readable_roots=[docs])

    assert ctx.resolve(str(docs / "guide.md")) == docs.resolve() / "guide.md"
    with pytest.raises(PathOutsideWorkspace):
        ctx.resolve("src/app.py")


def test_readable_roots_do_not_widen_writes(workspace: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    ctx = _context(workspace, readable_roots=[docs])

    with pytest.raises(PathOutsideWorkspace):
        ctx.resolve(str(docs / "guide.md"), write=True)
    assert ctx.resolve("out.txt", write=True) == workspace.resolve() / "out.txt"


# ----- ToolContext.resolve: protected folders -----


def test_a_protected_folder_is_refused_for_writes(protected_ctx: ToolContext) -> None:
    with pytest.raises(PathOutsideWorkspace, match=r"files under pinned/ are protected"):
        protected_ctx.resolve("pinned/rules.md", write=True)


def test_a_protected_folder_stays_readable(protected_ctx: ToolContext, workspace: Path) -> None:
    assert protected_ctx.resolve("pinned/rules.md") == workspace.resolve() / "pinned" / "rules.md"


@pytest.mark.parametrize("raw", ["pinned-notes/a.md", "notes/pinned/a.md", "pinned.md"])
def test_only_the_protected_top_level_folder_is_refused(
    protected_ctx: ToolContext, workspace: Path, raw: str
) -> None:
    assert protected_ctx.resolve(raw, write=True) == workspace.resolve() / raw


def test_a_protected_folder_cannot_be_reached_through_dot_dot_or_a_symlink(
    protected_ctx: ToolContext, workspace: Path
) -> None:
    (workspace / "pinned").mkdir()
    (workspace / "shortcut").symlink_to(workspace / "pinned", target_is_directory=True)

    with pytest.raises(PathOutsideWorkspace, match="protected"):
        protected_ctx.resolve("notes/../pinned/a.md", write=True)
    with pytest.raises(PathOutsideWorkspace, match="protected"):
        protected_ctx.resolve("shortcut/a.md", write=True)


def test_a_protected_folder_is_refused_under_every_writable_root(
    workspace: Path, memory_root: Path
) -> None:
    ctx = _context(workspace, writable_roots=[memory_root], protected_subdirs=("pinned",))

    with pytest.raises(PathOutsideWorkspace, match="protected"):
        ctx.resolve(str(memory_root / "pinned" / "a.md"), write=True)
    assert ctx.resolve(str(memory_root / "pinned" / "a.md")) == (
        memory_root.resolve() / "pinned" / "a.md"
    )


# ----- ToolResult.to_response -----

CALL = FunctionCall("call_7", "read_file", {"file_path": "a.txt"})


def test_a_successful_result_answers_with_its_output() -> None:
    result = ToolResult(output="file text", display="Read a.txt")

    assert result.ok
    assert result.to_response(CALL) == FunctionResponse(
        "call_7", "read_file", {"output": "file text"}
    )


def test_a_result_without_output_answers_with_empty_output() -> None:
    assert ToolResult().to_response(CALL) == FunctionResponse("call_7", "read_file", {"output": ""})


def test_a_failed_result_answers_with_its_error_only() -> None:
    result = ToolResult(output="partial", error="File not found: a.txt")

    assert not result.ok
    response = result.to_response(CALL)
    assert response == FunctionResponse("call_7", "read_file", {"error": "File not found: a.txt"})
    assert response.is_error
    assert response.text == "File not found: a.txt"


def test_an_empty_error_still_counts_as_a_failure() -> None:
    result = ToolResult(error="")

    assert not result.ok
    assert result.to_response(CALL).response == {"error": ""}


def test_a_note_goes_to_what_the_model_sees_on_a_copy() -> None:
    """A hook's note (ToolScheduler's PostToolUse context): added to the output of a success
    and to the error of a failure; the result it was made from is left as it was."""
    done = ToolResult(output="ok", display="Ran it", locations=[])
    failed = ToolResult(error="boom", display="Failed")

    noted, noted_failure = done.noted("\n\nnote"), failed.noted("\n\nnote")

    assert noted == ToolResult(output="ok\n\nnote", display="Ran it", locations=[])
    assert noted_failure == ToolResult(error="boom\n\nnote", display="Failed")
    assert (done.output, failed.error) == ("ok", "boom")
    assert ToolResult().noted("note").output == "note"


def test_a_path_naming_an_unknown_users_home_is_an_ordinary_relative_path(ctx: ToolContext) -> None:
    """`~nobody-here/x` cannot be expanded; it stays a name inside the workspace (no crash)."""
    assert ctx.resolve("~nobody-here/x") == (ctx.workspace / "~nobody-here" / "x").resolve()
