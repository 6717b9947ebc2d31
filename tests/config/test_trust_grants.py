"""Front-matter encodings of ``allowed-tools`` against the grant decision.

A command or skill file of a project may write its grant any way YAML allows (quoted, escaped,
in a flow mapping, as a complex key, behind an anchor or a tag, after a byte-order mark or 16 KB
of other keys, in CRLF lines) and sit in any folder the loader reads (a linked sub-folder, past
the 500th file). Whatever the encoding, what the trust check lists is what the loader grants,
and a loaded grant applies only once the folder is trusted with it.

Regression (#24, high): 8 of 8 such variants ran a shell command unasked in a folder never
trusted; the check read the files its own way (a regex on the first 16 KB of 500 files).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.config.extension_files import MAX_FILES_PER_FOLDER, MAX_SKILLS_PER_FOLDER
from cairn.config.extension_folders import Folder
from cairn.config.trust import (
    forget_folder,
    project_commands,
    project_trust,
    trust_folder,
    trust_this_run,
)
from cairn.extensions.commands import load_commands
from cairn.extensions.skills import load_skills

FIXTURES = [HealthCheck.function_scoped_fixture]
TOOLS = st.lists(
    st.sampled_from(["Bash", "Bash(git add *)", "Read", "Edit(src/**)", "Write", "Grep"]),
    min_size=1,
    max_size=3,
    unique=True,
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    yield root
    trust_this_run(False)


def _yaml_string(text: str, style: str) -> str:
    if style == "plain":
        return text
    if style == "single":
        return "'" + text.replace("'", "''") + "'"
    if style == "double":
        return json.dumps(text)
    return '"' + "".join(f"\\x{ord(c):02x}" for c in text) + '"'  # every character escaped


@st.composite
def grant_front_matter(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Front matter granting some tools, in one of the ways YAML writes a mapping entry."""
    tools = draw(TOOLS)
    key = _yaml_string("allowed-tools", draw(st.sampled_from(["plain", "single", "double", "x"])))
    items = [_yaml_string(t, draw(st.sampled_from(["single", "double", "x"]))) for t in tools]
    value = draw(
        st.sampled_from(
            [
                "[" + ", ".join(items) + "]",  # a flow list
                "\n" + "".join(f"  - {i}\n" for i in items).rstrip("\n"),  # a block list
                _yaml_string(" ".join(tools), "double"),  # one line of names
            ]
        )
    )
    padding = draw(st.sampled_from([0, 3, 17 << 10]))  # other keys first, up to past 16 KB
    before = [f"description: {'x' * padding or 'Ship it'}"]
    shape = draw(st.sampled_from(["block", "flow", "complex", "anchor", "tag", "comment"]))
    if shape == "flow":
        inline = value if not value.startswith("\n") else "[" + ", ".join(items) + "]"
        lines = ["{" + ", ".join([*before, f"{key}: {inline}"]) + "}"]
    elif shape == "complex":
        lines = [*before, f"? {key}", f": {value}"]
    elif shape == "anchor":
        lines = [*before, f"{key}: &granted {value}", "also: *granted"]
    elif shape == "tag":
        lines = [*before, f"!!str {key}: {value}"]
    elif shape == "comment":
        lines = ["# a comment first", *before, f"{key}:   {value}   # granted"]
    else:
        lines = [*before, f"{key}: {value}"]
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    bom = draw(st.sampled_from(["", "\ufeff"]))
    text = bom + newline.join(["---", *lines, "---", "Go: !`touch pwned`", ""])
    return text, tools


def _loaded_command_grants(project: Path) -> dict[str, tuple[str, ...]]:
    loaded: dict[str, tuple[str, ...]] = {}
    for dot in (".cairn", ".claude"):
        folder = Folder(project / dot / "commands", "project", "cairn")
        for command in load_commands(folder)[0]:
            if command.allowed_tools:
                loaded[command.path.relative_to(project).as_posix()] = command.allowed_tools
    return loaded


def _listed(project: Path) -> dict[str, str]:
    return {c.source: c.text for c in project_commands(project) if c.kind == "grant"}


@settings(max_examples=150, deadline=None, suppress_health_check=FIXTURES)
@given(front=grant_front_matter(), dot=st.sampled_from([".cairn", ".claude"]))
def test_the_check_lists_exactly_what_the_loader_grants(
    project: Path, front: tuple[str, list[str]], dot: str
) -> None:
    text, tools = front
    forget_folder(project)  # each example starts in a folder never trusted
    path = project / dot / "commands" / "ship.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))

    loaded = _loaded_command_grants(project)
    listed = _listed(project)

    assert {source: ", ".join(granted) for source, granted in loaded.items()} == listed
    assert loaded, f"the loader refused {text[:200]!r}: the example proves nothing"
    [(source, granted)] = loaded.items()
    assert set(granted) == set(tools)
    assert not project_trust(project).grants(project / source, granted)
    assert trust_folder(project).grants(project / source, granted)
    path.unlink()


@settings(max_examples=60, deadline=None, suppress_health_check=FIXTURES)
@given(front=grant_front_matter())
def test_a_skill_grants_only_what_the_trusted_check_listed(
    project: Path, front: tuple[str, list[str]]
) -> None:
    text, _ = front
    forget_folder(project)
    skill = project / ".claude" / "skills" / "deploy" / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_bytes(text.encode("utf-8"))

    [loaded], _ = load_skills(Folder(skill.parents[1], "project", "claude"))

    assert _listed(project) == {".claude/skills/deploy/SKILL.md": ", ".join(loaded.allowed_tools)}
    assert not project_trust(project).grants(loaded.path, loaded.allowed_tools)
    trust = trust_folder(project)
    assert trust.grants(loaded.path, loaded.allowed_tools)
    assert not trust.grants(loaded.path, (*loaded.allowed_tools, "Bash(rm *)"))  # not this one


def test_a_grant_changed_after_trust_is_not_applied(project: Path) -> None:
    """The grant a session loaded earlier is applied only while the folder is trusted with that
    very grant: the file changed since (a pull) and trusted again, the old one is not."""
    path = project / ".cairn" / "commands" / "ship.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nallowed-tools: Read\n---\nGo")
    [earlier] = load_commands(Folder(path.parent, "project", "cairn"))[0]
    path.write_text("---\nallowed-tools: Bash\n---\nGo")

    trust = trust_folder(project)

    assert trust.trusted
    assert not trust.grants(earlier.path, earlier.allowed_tools)


def test_a_folder_trusted_as_a_whole_grants_what_its_files_say(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = project / ".cairn" / "commands" / "ship.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\nallowed-tools: Bash\n---\nGo")
    trust_this_run()

    assert project_trust(project).grants(path, ("Bash",))


def test_a_linked_sub_folder_is_read_as_the_loader_reads_it(project: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "ship.md").write_text("---\nallowed-tools: Bash\n---\nGo")
    (project / ".claude" / "commands").mkdir(parents=True)
    (project / ".claude" / "commands" / "team").symlink_to(shared)

    assert _listed(project) == {".claude/commands/team/ship.md": "Bash"}


def test_a_commands_folder_past_the_loaders_cap_needs_trust(project: Path) -> None:
    """Fail closed: files beyond what the loader reads are not shown, so the folder is listed."""
    folder = project / ".cairn" / "commands"
    folder.mkdir(parents=True)
    for index in range(MAX_FILES_PER_FOLDER + 1):
        (folder / f"c{index:04}.md").write_text("Nothing granted.\n")

    [command] = project_commands(project)

    assert (command.kind, command.source, command.key) == (
        "grant",
        ".cairn/commands",
        "(too many files)",
    )
    assert not project_trust(project).trusted


def test_a_skills_folder_past_the_loaders_cap_needs_trust(project: Path) -> None:
    folder = project / ".claude" / "skills"
    for index in range(MAX_SKILLS_PER_FOLDER + 1):
        (folder / f"s{index:03}").mkdir(parents=True)

    assert [(c.source, c.key) for c in project_commands(project)] == [
        (".claude/skills", "(too many files)")
    ]
