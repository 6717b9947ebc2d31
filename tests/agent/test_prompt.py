"""The main system prompt and the startup context that opens every conversation."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from cairn.agent.prompt import (
    CORE_PROMPT,
    LISTINGS,
    MAX_LISTING_ENTRIES,
    STARTUP_CONTEXT_ACK,
    build_system_prompt,
    startup_context,
)
from cairn.agent.reminders import is_system_reminder
from cairn.content import Text

from ..polling import eventually

SEPARATOR = "\n\n---\n\n"
LISTING_INTRO = "Here is the folder structure of the current working directory:\n\n"
TRUNCATED = "... (listing truncated)"


def _listing(cwd: Path) -> list[str]:
    """The listing lines of the startup context for ``cwd``."""
    user, _ = startup_context(cwd)
    text = user.text
    body = text[text.index(LISTING_INTRO) + len(LISTING_INTRO) :]
    return body.removesuffix("\n</system-reminder>").split("\n")


# ----- the system prompt -----


def test_the_system_prompt_is_core_then_context_files_then_memory() -> None:
    prompt = build_system_prompt(
        context_files="# AGENTS.md\nUse tabs.", memory_section="# auto memory\nNo memories."
    ).text

    assert prompt.split(SEPARATOR) == [
        CORE_PROMPT.strip(),
        "# AGENTS.md\nUse tabs.",
        "# auto memory\nNo memories.",
    ]


def test_appended_text_comes_after_the_memory_section() -> None:
    prompt = build_system_prompt(context_files="ctx", memory_section="mem", append="extra")

    assert prompt.text.split(SEPARATOR)[1:] == ["ctx", "mem", "extra"]


def test_empty_sections_leave_no_empty_separator() -> None:
    assert build_system_prompt().text == CORE_PROMPT.strip()
    assert build_system_prompt(context_files="  \n", memory_section="mem").text == (
        f"{CORE_PROMPT.strip()}{SEPARATOR}mem"
    )


def test_sections_are_trimmed_before_joining() -> None:
    prompt = build_system_prompt(context_files="\n\nctx\n\n", memory_section="  mem  ")

    assert prompt.text.endswith(f"{SEPARATOR}ctx{SEPARATOR}mem")


def test_the_project_context_is_the_context_files_and_memory_without_the_core() -> None:
    """A recap reuses the project's part of the prompt as sections, not by splitting text."""
    prompt = build_system_prompt(context_files="ctx --- with a rule", memory_section="mem")

    assert prompt.project_context == f"ctx --- with a rule{SEPARATOR}mem"
    assert build_system_prompt().project_context == ""


# ----- the startup context -----


def test_the_startup_context_is_a_reminder_and_the_acknowledgement(tmp_path: Path) -> None:
    user, model = startup_context(tmp_path, today=_dt.date(2024, 3, 5))

    assert user.role == "user"
    [part] = user.parts
    assert isinstance(part, Text) and is_system_reminder(part.text)
    assert "Today's date is Tuesday, March 05, 2024." in part.text
    assert f"I'm currently working in the directory: {tmp_path}\n" in part.text
    assert model.role == "model"
    assert model.parts == [Text(STARTUP_CONTEXT_ACK)]


def test_the_listing_shows_files_and_folders_two_levels_deep(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg" / "deep").mkdir(parents=True)
    (tmp_path / "README.md").write_text("x")
    (tmp_path / "src" / "main.py").write_text("x")
    (tmp_path / "src" / "pkg" / "mod.py").write_text("x")
    (tmp_path / "src" / "pkg" / "deep" / "hidden_by_depth.py").write_text("x")

    assert _listing(tmp_path) == [
        "README.md",
        "src/",
        "  main.py",
        "  pkg/",
        "    mod.py",
    ]


def test_the_listing_leaves_out_git_node_modules_and_hidden_folders(tmp_path: Path) -> None:
    for folder in (".git", "node_modules", ".venv", "__pycache__", ".cache"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "inside.txt").write_text("x")
    (tmp_path / "app.py").write_text("x")

    assert _listing(tmp_path) == ["app.py"]


def test_an_empty_folder_says_so(tmp_path: Path) -> None:
    assert _listing(tmp_path) == ["(empty folder)"]


def test_a_long_listing_of_files_is_capped(tmp_path: Path) -> None:
    for i in range(MAX_LISTING_ENTRIES + 50):
        (tmp_path / f"file_{i:04d}.txt").write_text("x")

    lines = _listing(tmp_path)

    assert len(lines) == MAX_LISTING_ENTRIES + 1
    assert lines[-1].strip() == TRUNCATED
    assert lines[0] == "file_0000.txt"


def test_a_long_listing_of_folders_is_capped_too(tmp_path: Path) -> None:
    """Regression: folder lines did not count towards the cap, so a workspace of many (empty)
    folders put every one of them into the first request."""
    for i in range(MAX_LISTING_ENTRIES + 50):
        (tmp_path / f"dir_{i:04d}").mkdir()

    lines = _listing(tmp_path)

    assert len(lines) == MAX_LISTING_ENTRIES + 1
    assert lines[-1].strip() == TRUNCATED


def _kept(cwd: Path) -> None:
    """Wait until the listing of ``cwd`` is kept (its folders older than a timestamp's
    granularity), as in a daemon whose sessions start long after the files were written."""
    assert eventually(lambda: bool(_listing(cwd)) and LISTINGS.kept(str(cwd)))


def test_a_kept_listing_shows_a_file_added_two_levels_down_at_once(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "a.py").write_text("x")
    _kept(tmp_path)
    hits = LISTINGS.hits

    assert _listing(tmp_path) == ["src/", "  pkg/", "    a.py"]
    assert LISTINGS.hits == hits + 1  # given again, not walked

    (tmp_path / "src" / "pkg" / "b.py").write_text("x")

    assert _listing(tmp_path) == ["src/", "  pkg/", "    a.py", "    b.py"]


def test_a_link_whose_target_becomes_a_folder_changes_a_kept_listing(tmp_path: Path) -> None:
    """A link is listed as a file only while it leads to one; its own folder does not change
    when its target does."""
    project, target = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    target.write_text("x")
    (project / "data").symlink_to(target)
    _kept(project)
    assert _listing(project) == ["data"]

    target.unlink()
    target.mkdir()

    assert _listing(project) == ["(empty folder)"]
