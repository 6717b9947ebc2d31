from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from cairn.cli.memory_cmd import memory_app
from cairn.memory.paths import memory_roots
from cairn.memory.store import folders
from cairn.testing import RecordedRequest, Reply, ScriptedServer

from ..memory.postgres_helpers import postgres_dsn, postgres_server

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

_ENDPOINT_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL")


class Cli:
    """``cairn memory`` run in a temp project with its own CAIRN_HOME."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.project = tmp_path / "project"
        self.project.mkdir()
        self.home = tmp_path / "home"
        monkeypatch.chdir(self.project)
        self.env: dict[str, str | None] = {
            "CAIRN_HOME": str(self.home),
            "CAIRN_MEMORY_BASE_DIR": None,
            "CAIRN_MEMORY_LOCAL": None,
            "CAIRN_MEMORY_PROJECT_SCOPE": None,
            "COLUMNS": "200",  # rich tables: one row per line
            **dict.fromkeys(_ENDPOINT_VARIABLES),
        }
        roots = memory_roots(self.project, environ={"CAIRN_HOME": str(self.home)})
        assert roots.project is not None
        self.root = roots.project
        self.user_root = roots.user

    def use_endpoint(self, server: ScriptedServer) -> None:
        self.env.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k", OPENAI_MODEL="m")

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(memory_app, list(args), env=self.env, input=input)

    def write(
        self,
        name: str,
        *,
        title: str,
        description: str,
        body: str = "",
        root: Path | None = None,
        type: str = "project",
    ) -> Path:
        path = (root or self.root) / type / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"---\nname: {title}\ndescription: {description}\ntype: {type}\n---\n\n{body}\n"
        )
        return path


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    return Cli(tmp_path, monkeypatch)


def _manifest_path(request: RecordedRequest, name: str) -> str:
    line = next(line for line in request.last_user_text().splitlines() if f"/{name}.md " in line)
    return line.split("] ", 1)[1].rsplit(" (", 1)[0]


def _no_traceback(result: Result) -> None:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_path_prints_the_memory_roots(cli: Cli) -> None:
    result = cli("path")
    assert result.exit_code == 0
    assert f"project memory: {cli.root}" in result.output
    assert f"user memory:    {cli.user_root}" in result.output


def test_list_says_where_memories_go_when_there_are_none(cli: Cli) -> None:
    result = cli("list")
    assert result.exit_code == 0
    assert "No memories yet" in result.output


def test_list_shows_type_scope_age_and_title(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    cli.write("tz", title="Timezone", description="CET", root=cli.user_root, type="user")
    result = cli("list")
    assert result.exit_code == 0
    rows = [line for line in result.output.splitlines() if "Use uv" in line or "Timezone" in line]
    assert any("project" in row and "today" in row for row in rows)
    assert any("user" in row and "Timezone" in row for row in rows)


def _many(cli: Cli, count: int) -> list[str]:
    """``count`` memories, the newest last; their titles, newest first."""
    old = time.time() - 30 * 86_400
    for n in range(count):
        path = cli.write(f"m{n:04d}", title=f"Memory {n}", description=f"number {n}")
        os.utime(path, (old + n * 60, old + n * 60))
    return [f"Memory {n}" for n in reversed(range(count))]


def _column(lines: list[str], name: str) -> list[str]:
    """The cells of column ``name`` (aligned under the header's word) of the listing's rows."""
    header = lines[0]
    start = header.index(name)
    following = [header.index(word) for word in ("Scope", "Age", "Title", "Path")]
    end = min((at for at in following if at > start), default=None)
    return [line[start:end].strip() for line in lines[1:]]


def test_list_writes_every_memory_newest_first_page_after_page(cli: Cli) -> None:
    """Issue #28: a long listing is written a page at a time (PAGE_ROWS rows), one line a
    memory under one header, instead of one table laid out in full before its first line."""
    from cairn.cli.memory_listing import PAGE_ROWS

    titles = _many(cli, PAGE_ROWS * 2 + 5)
    result = cli("list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["Type", "Scope", "Age", "Title", "Path"]
    assert _column(lines, "Title") == titles
    assert set(_column(lines, "Scope")) == {"project"}
    assert set(_column(lines, "Age")) == {"30 days ago", "29 days ago"}
    assert _column(lines, "Path")[0] == f"project/m{len(titles) - 1:04d}.md"


def test_list_limit_shows_the_newest_and_how_many_more(cli: Cli) -> None:
    titles = _many(cli, 7)
    result = cli("list", "--limit", "3")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert _column(lines[:4], "Title") == titles[:3]
    assert lines[4:] == ["… 4 more (of 7): --limit 0 lists them all"]


def _saved(cli: Cli) -> None:
    """Every memory written so far in a saved index (a list then starts from it)."""
    assert cli("reindex").exit_code == 0


def _titles(cli: Cli) -> list[str]:
    result = cli("list")
    assert result.exit_code == 0, result.output
    return _column(result.output.splitlines(), "Title")


def test_list_leaves_out_a_file_deleted_after_the_index_was_saved(cli: Cli) -> None:
    """Issue #28: a list starts from the saved index without checking every file first, but
    checks each memory before it is shown: a deleted one is never listed as live."""
    cli.write("uv", title="Use uv", description="Install with uv")
    gone = cli.write("pip", title="Never pip", description="Not pip")
    _saved(cli)
    gone.unlink()
    assert _titles(cli) == ["Use uv"]
    assert "… " not in cli("list", "--limit", "1").output  # nothing more: one memory


def test_list_leaves_out_a_forgotten_memory(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    cli.write("docker", title="Docker compose", description="Compose v2 only")
    _saved(cli)
    assert cli("forget", "install with uv", "--yes").exit_code == 0
    assert _titles(cli) == ["Docker compose"]


def test_list_shows_a_file_added_outside_cairn_after_the_index_was_saved(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    _saved(cli)
    added = cli.write("ruff", title="Lint with ruff", description="ruff check", type="feedback")
    cli.write("mine", title="User note", description="mine", root=cli.user_root)
    os.utime(added, (time.time() + 60, time.time() + 60))  # newest: listed first
    assert _titles(cli) == ["Lint with ruff", "Use uv", "User note"]


def test_list_shows_the_new_title_of_a_file_edited_in_place(cli: Cli) -> None:
    path = cli.write("uv", title="Use uv", description="Install with uv")
    cli.write("docker", title="Docker compose", description="Compose v2 only")
    _saved(cli)
    stamp = path.stat().st_mtime
    path.write_text("---\nname: Use uv always\ndescription: Install with uv only\n"
                    "type: project\n---\n\nbody\n")  # fmt: skip
    os.utime(path, (stamp, stamp))  # same date, new size
    assert sorted(_titles(cli)) == ["Docker compose", "Use uv always"]
    assert cli("show", "Use uv always").exit_code == 0


def test_show_prints_a_memory_found_by_title(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv", body="Never pip.")
    result = cli("show", "use uv")
    assert result.exit_code == 0
    assert "Use uv" in result.output and "Never pip." in result.output


def test_show_of_an_unknown_memory_fails_with_a_message(cli: Cli) -> None:
    result = cli("show", "nothing like it")
    assert result.exit_code == 1
    assert "no memory matches 'nothing like it'" in result.output
    _no_traceback(result)


def test_show_of_an_ambiguous_title_lists_the_candidates(cli: Cli) -> None:
    cli.write("a", title="Deploy staging", description="x")
    cli.write("b", title="Deploy prod", description="y")
    result = cli("show", "deploy")
    assert result.exit_code == 1
    assert "2 memories match" in result.output and "project:project/a.md" in result.output


def test_show_by_path_of_a_file_deleted_after_the_index_was_saved_finds_nothing(
    cli: Cli,
) -> None:
    """Issue #28: a path is looked up in the saved index without checking every file first,
    but the named file itself is checked: a deleted memory is never shown from the index."""
    cli.write("uv", title="Use uv", description="Install with uv")
    gone = cli.write("pip", title="Never pip", description="Not pip")
    _saved(cli)
    gone.unlink()
    for reference in ("project:project/pip.md", "project/pip.md", str(gone)):
        result = cli("show", reference)
        assert result.exit_code == 1, reference
        assert f"no memory matches {reference!r}" in result.output
    assert "Use uv" in cli("show", "project:project/uv.md").output


def test_show_by_path_of_a_file_edited_in_place_shows_its_new_text(cli: Cli) -> None:
    path = cli.write("uv", title="Use uv", description="Install with uv", body="Never pip.")
    cli.write("docker", title="Docker compose", description="Compose v2 only")
    _saved(cli)
    stamp = path.stat().st_mtime
    path.write_text("---\nname: Use uv always\ndescription: Install with uv only\n"
                    "type: project\n---\n\nNot even pipx.\n")  # fmt: skip
    os.utime(path, (stamp, stamp))  # same date, new size
    for reference in ("project:project/uv.md", "project/uv.md", str(path)):
        result = cli("show", reference)
        assert result.exit_code == 0, result.output
        assert "Use uv always" in result.output and "Not even pipx." in result.output
        assert "Never pip." not in result.output


def test_show_by_path_finds_a_file_added_after_the_index_was_saved(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    _saved(cli)
    cli.write("mine", title="User note", description="mine", body="Tabs.", root=cli.user_root)
    result = cli("show", "user:project/mine.md")
    assert result.exit_code == 0, result.output
    assert "User note" in result.output and "Tabs." in result.output


def test_show_by_path_of_a_forgotten_memory_finds_nothing(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    cli.write("docker", title="Docker compose", description="Compose v2 only")
    _saved(cli)
    assert cli("forget", "install with uv", "--yes").exit_code == 0
    result = cli("show", "project:project/uv.md")
    assert result.exit_code == 1 and "no memory matches" in result.output
    assert cli("show", "project:project/docker.md").exit_code == 0


def test_show_by_title_after_the_index_was_saved_sees_files_changed_since(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    gone = cli.write("pip", title="Use pip", description="Not pip")
    _saved(cli)
    gone.unlink()
    cli.write("ruff", title="Use ruff", description="ruff check", body="Lint first.")
    assert "Lint first." in cli("show", "use ruff").output
    assert cli("show", "use pip").exit_code == 1
    result = cli("show", "use")
    assert result.exit_code == 1 and "2 memories match" in result.output


def test_search_shows_the_fast_scores(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    cli.write("lunch", title="Lunch", description="Fridays")
    result = cli("search", "install with uv")
    assert result.exit_code == 0
    (row,) = [line for line in result.output.splitlines() if "Use uv" in line]
    assert float(row.split()[1] if row.startswith("│") else row.split()[0]) > 0
    assert "Lunch" not in result.output


def test_search_finds_a_memory_by_a_two_letter_word(cli: Cli) -> None:
    """Bug: words shorter than three characters were never tokens (the reference's rule), so
    `cairn memory search uv` found nothing, though a memory's title says "Use uv"."""
    cli.write("uv", title="Use uv", description="Install with uv")
    cli.write("docker", title="Docker compose", description="Compose v2 only")
    result = cli("search", "uv")
    assert result.exit_code == 0, result.output
    assert "Use uv" in result.output and "Docker" not in result.output


def test_search_without_a_match_exits_nonzero(cli: Cli) -> None:
    result = cli("search", "kubernetes")
    assert result.exit_code == 1 and "No memory matches: kubernetes" in result.output


def test_search_after_the_index_was_saved_sees_files_changed_since(cli: Cli) -> None:
    """Issue #28: search ranks from the saved index after checking its folders: a memory
    replaced (written to a temp file and renamed over, as editors and cairn write), added or
    deleted outside cairn since the save is seen."""
    edited = cli.write("uv", title="Use uv", description="Install with uv")
    gone = cli.write("lantern", title="Lantern", description="the lantern rule")
    _saved(cli)
    _replace(edited, "---\nname: Use uv\ndescription: Install with uv and a lantern\n"
                     "type: project\n---\n\nbody\n")  # fmt: skip
    gone.unlink()
    cli.write("mine", title="Mine", description="my lantern", root=cli.user_root)
    result = cli("search", "lantern")
    assert result.exit_code == 0, result.output
    assert "Use uv" in result.output and "Mine" in result.output
    assert "the lantern rule" not in result.output and "lantern.md" not in result.output


def _replace(path: Path, text: str) -> None:
    """``path`` rewritten as editors and cairn write: a temp file renamed over it."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def _edit_in_place(path: Path, old: str, new: str) -> None:
    """``path`` rewritten in place, to the same size and modification time (only its change
    time moves)."""
    info = path.stat()
    path.write_text(path.read_text().replace(old, new))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders count as settled at once (not only two seconds after their last change), so
    a command trusts the folders the previous one checked, as it does on a real memory."""
    monkeypatch.setattr(folders, "_SETTLE_NS", 0)


def _checked(cli: Cli) -> None:
    """A saved index, and its folders' check kept beside it by a search."""
    _saved(cli)
    cli("search", "anything")
    assert (Path(cli.home) / "projects").is_dir()


@pytest.mark.usefixtures("settled")
def test_search_finds_files_added_by_hand_in_an_old_and_a_new_folder(cli: Cli) -> None:
    """Issue #28: search trusts the saved index and its folders' stat; a file added by hand
    changes its folder, which is then listed again."""
    cli.write("uv", title="Use uv", description="Install with uv")
    _checked(cli)
    cli.write("lamp", title="Lamp", description="the lamp rule")
    cli.write("lamp-ref", title="Lamp docs", description="the lamp manual", type="reference")
    result = cli("search", "lamp")
    assert result.exit_code == 0, result.output
    assert "Lamp docs" in result.output and "the lamp rule" not in result.output
    assert "│ Lamp " in result.output


@pytest.mark.usefixtures("settled")
@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_search_shows_a_memory_it_serves_as_the_file_says_now(cli: Cli, how: str) -> None:
    """Issue #28: each memory search is about to show is stat-ed first and read again when
    its file changed, in place (same size and time) or replaced: its new title is shown, and
    a memory that no longer matches is left out, the next one taking its place."""
    lamp = cli.write("lamp", title="Lamp", description="the lamp rule")
    dull = cli.write("dull", title="Dull", description="a lamp, rarely")
    _checked(cli)
    if how == "in place":
        _edit_in_place(lamp, "name: Lamp", "name: Lump")
        _edit_in_place(dull, "a lamp, rarely", "a damp, rarely")
    else:
        _replace(lamp, lamp.read_text().replace("name: Lamp", "name: Lump"))
        _replace(dull, dull.read_text().replace("a lamp, rarely", "a damp, rarely"))
    result = cli("search", "lamp")
    assert result.exit_code == 0, result.output
    assert "│ Lump " in result.output
    assert "Lamp" not in result.output and "Dull" not in result.output


@pytest.mark.usefixtures("settled")
def test_search_and_show_leave_out_a_memory_removed_since(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    lamp = cli.write("lamp", title="Lamp", description="the lamp rule")
    _checked(cli)
    lamp.unlink()
    result = cli("search", "lamp")
    assert result.exit_code == 1 and "No memory matches: lamp" in result.output
    for reference in ("Lamp", "project/lamp.md"):
        result = cli("show", reference)
        assert result.exit_code == 1 and "no memory matches" in result.output


@pytest.mark.usefixtures("settled")
def test_an_in_place_edit_of_a_memory_search_does_not_serve_waits_for_a_full_check(
    cli: Cli,
) -> None:
    """Issue #28, the documented gap (docs/memory.md, "Checking what is served"): an edit in
    place leaves its folder as it was, so a memory that did not match before is not found by
    its new words until a full check (here `cairn memory reindex`)."""
    edited = cli.write("uv", title="Use uv", description="Install with uv tool")
    cli.write("lamp", title="Lamp", description="the lamp rule")
    _checked(cli)
    _edit_in_place(edited, "uv tool", "a lamp.")
    assert "Use uv" not in cli("search", "lamp").output
    _saved(cli)
    assert "Use uv" in cli("search", "lamp").output


@pytest.mark.usefixtures("settled")
@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_forget_removes_a_memory_changed_since_the_index_saw_it_only_if_it_still_matches(
    cli: Cli, how: str
) -> None:
    """Issue #28: forget finds its candidates in the saved texts, then reads each one's file
    again when it changed: one that no longer holds the request stays."""
    edited = cli.write("uv", title="Use uv", description="Install with uv")
    _checked(cli)
    text = edited.read_text().replace("Install with uv", "Install with pipx")
    _replace(edited, text) if how == "replaced" else edited.write_text(text)
    result = cli("forget", "install with uv", "--yes")
    assert result.exit_code == 1, result.output
    assert edited.read_text() == text
    again = text.replace("with pipx", "with uv, pipx")
    _replace(edited, again) if how == "replaced" else edited.write_text(again)
    result = cli("forget", "install with uv", "--yes")
    assert result.exit_code == 0, result.output
    assert not edited.exists()


def _cairn(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    """``cairn memory ...`` as its own process (the walks start before its modules load)."""
    env = {k: v for k, v in {**os.environ, **cli.env}.items() if v is not None}
    return subprocess.run([sys.executable, "-m", "cairn.cli.main", "memory", *args],
                          cwd=cli.project, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_search_in_its_own_process_shows_a_served_memory_edited_in_place(cli: Cli) -> None:
    """Issue #28: the quick path (no typer) checks what it serves too: an edit in place that
    keeps the size and the mtime (only the ctime moves) of a memory search shows is seen, also
    when its folder's check was kept by the previous search."""
    lamp = cli.write("lamp", title="Lamp", description="the lamp rule")
    _saved(cli)
    for _ in range(2):  # the second against what the first kept
        done = _cairn(cli, "search", "lamp")
        assert done.returncode == 0 and "Lamp" in done.stdout, done.stderr
    _edit_in_place(lamp, "name: Lamp", "name: Lump")
    done = _cairn(cli, "search", "lamp")
    assert done.returncode == 0 and "Lump" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("command", [("search", "lamp"), ("show", "Lamp")])
def test_search_and_show_load_neither_asyncio_nor_typer(cli: Cli, command: tuple[str, str]) -> None:
    """Issue #28: importing asyncio was about a tenth of a search's instructions at 100,000
    memories, for modules a search never runs (the scheduler, Recall, the warm-up)."""
    cli.write("lamp", title="Lamp", description="the lamp rule")
    _saved(cli)
    code = (
        "import sys\nfrom cairn.cli.main import main\n"
        "sys.argv = ['cairn', 'memory', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('LOADED', *sorted({'asyncio', 'typer', 'shutil'} & set(sys.modules)))\n"
    )
    env = {k: v for k, v in {**os.environ, **cli.env}.items() if v is not None}
    done = subprocess.run([sys.executable, "-c", code, *command], cwd=cli.project, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "Lamp" in done.stdout, done.stderr
    assert done.stdout.splitlines()[-1] == "LOADED", done.stdout


def test_a_walk_started_for_a_command_that_fails_leaves_no_process_behind(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    _saved(cli)
    done = _cairn(cli, "search", "uv", "--no-such-option")
    assert done.returncode == 42
    root = os.fsencode(cli.root)
    running = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                running += [entry.name] if root in (entry / "cmdline").read_bytes() else []
            except OSError:
                continue
    assert running == []


def test_forget_after_the_index_was_saved_finds_a_memory_by_its_new_text(cli: Cli) -> None:
    """Issue #28: forget matches what the files say now, not what the saved index says (a
    file replaced: its folder changed)."""
    edited = cli.write("uv", title="Use uv", description="Install with uv")
    kept = cli.write("docker", title="Docker compose", description="Compose v2 only")
    _saved(cli)
    _replace(edited, "---\nname: Use uv\ndescription: Install with pipx\ntype: project\n"
                     "---\n\nbody\n")  # fmt: skip
    assert cli("forget", "install with uv", "--yes").exit_code == 1
    result = cli("forget", "install with pipx", "--yes")
    assert result.exit_code == 0, result.output
    assert not edited.exists() and kept.exists()
    assert cli("restore").exit_code == 0 and edited.exists()


def test_recall_without_an_endpoint_shows_the_fast_phase_only(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv", body="Never pip.")
    result = cli("recall", "how do I install with uv?")
    assert result.exit_code == 0
    assert "fast phase" in result.output
    assert "### Use uv (project/uv.md)" in result.output
    assert "The refined phase needs a model endpoint" in result.output


def test_recall_with_an_endpoint_shows_the_refined_phase_minus_fast_documents(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    cli.write("lock", title="Lock files", description="Commit the lock file")

    def selector(request: RecordedRequest) -> Reply:
        paths = [_manifest_path(request, "uv"), _manifest_path(request, "lock")]
        return Reply(text=json.dumps({"selected_memories": paths}))

    with ScriptedServer(handler=selector) as server:
        cli.use_endpoint(server)
        result = cli("recall", "install with uv")
    assert result.exit_code == 0, result.output
    fast, refined = result.output.split("refined phase (model")
    assert "### Use uv" in fast
    assert "### Lock files" in refined and "### Use uv" not in refined


def test_recall_when_memory_is_off_says_a_turn_gets_nothing(cli: Cli) -> None:
    settings = cli.project / ".cairn" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"memory": {"enableManagedAutoMemory": False}}))
    result = cli("recall", "anything")
    assert result.exit_code == 0 and "Managed memory is off" in result.output


def test_forget_with_yes_moves_the_memory_to_the_trash_and_restore_brings_it_back(cli: Cli) -> None:
    path = cli.write("uv", title="Use uv", description="Install with uv")
    original = path.read_bytes()
    result = cli("forget", "install with uv", "--yes")
    assert result.exit_code == 0, result.output
    assert "Forgot 1 memory entry from: project:project/uv.md" in result.output
    assert not path.exists()
    assert "Use uv" not in (cli.root / "MEMORY.md").read_text()
    restored = cli("restore")
    assert restored.exit_code == 0
    assert "Restored 1 memory entry" in restored.output
    assert path.read_bytes() == original


def test_forget_uses_the_model_when_an_endpoint_is_configured(cli: Cli) -> None:
    kept = cli.write("uv", title="Use uv", description="Install with uv")
    gone = cli.write("pip", title="No pip", description="Never pip")

    def chooser(request: RecordedRequest) -> Reply:
        return Reply(text=json.dumps({"selected_ids": ["project:project/pip.md"]}))

    with ScriptedServer(handler=chooser) as server:
        cli.use_endpoint(server)
        result = cli("forget", "the package manager I dislike", "--yes")
        (request,) = server.requests_for("forget")
    assert result.exit_code == 0, result.output
    assert "(model match)" in result.output
    assert kept.exists() and not gone.exists()
    assert (
        "<user-content>\nthe package manager I dislike\n</user-content>" in request.last_user_text()
    )


def test_forget_without_yes_refuses_when_stdin_is_not_a_terminal(cli: Cli) -> None:
    path = cli.write("uv", title="Use uv", description="Install with uv")
    result = cli("forget", "install with uv", input="y\n")
    assert result.exit_code == 1
    assert "add --yes" in result.output
    assert path.exists()
    _no_traceback(result)


def test_forget_with_no_match_exits_nonzero(cli: Cli) -> None:
    result = cli("forget", "kubernetes", "--yes")
    assert result.exit_code == 1 and "No memory entries matched: kubernetes" in result.output


def test_forget_of_empty_text_is_a_usage_error(cli: Cli) -> None:
    result = cli("forget", "  ", "--yes")
    assert result.exit_code == 42 and "Usage: cairn memory forget" in result.output


def test_restore_with_nothing_to_restore_exits_nonzero(cli: Cli) -> None:
    result = cli("restore")
    assert result.exit_code == 1 and "Nothing to restore" in result.output


def test_reindex_writes_the_indexes_and_reports_counts(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    result = cli("reindex")
    assert result.exit_code == 0
    assert "Indexed 1 memory (1 read again); rebuilt MEMORY.md in" in result.output
    assert "- [Use uv](project/uv.md) — Install with uv" in (cli.root / "MEMORY.md").read_text()


def test_a_broken_settings_file_is_a_clear_error_not_a_traceback(cli: Cli) -> None:
    cli.home.mkdir()
    (cli.home / "settings.json").write_text("{ not json")
    result = cli("list")
    assert result.exit_code == 52
    assert "settings.json line 1" in result.output and "invalid JSON" in result.output
    _no_traceback(result)


def test_an_unknown_setting_is_warned_about_by_every_memory_command(cli: Cli) -> None:
    """Regression (#18): `cairn memory list` did not show unknown-key settings warnings."""
    cli.home.mkdir()
    (cli.home / "settings.json").write_text(json.dumps({"memory": {"enableAutoMemroy": False}}))
    for command in (["list"], ["path"], ["log"]):
        result = cli(*command)
        assert result.exit_code == 0, result.output
        assert (
            f"warning: {cli.home / 'settings.json'}: unknown setting "
            "`memory.enableAutoMemroy` is ignored"
        ) in result.stderr


def test_the_command_module_does_not_import_the_http_client() -> None:
    """`cairn memory list` must not pay for httpx; only recall and forget need it."""
    code = "import sys, cairn.cli.memory_cmd; print('cairn.llm.openai' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def _read_until(fd: int, marker: bytes, timeout: float = 20.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise AssertionError(f"no {marker!r} in {seen!r}")
        try:
            seen += os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
    return seen


@pytest.mark.parametrize(("answer", "forgotten"), [(b"y", True), (b"n", False)])
def test_forget_in_a_terminal_asks_before_removing(
    cli: Cli, answer: bytes, forgotten: bool
) -> None:
    path = cli.write("uv", title="Use uv", description="Install with uv")
    env = {k: v for k, v in {**os.environ, **cli.env}.items() if v is not None}
    code = "from cairn.cli.memory_cmd import memory_app; memory_app(['forget', 'install with uv'])"
    controller, terminal = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=terminal, stdout=terminal, stderr=terminal,
        env=env, cwd=cli.project,
    )  # fmt: skip
    os.close(terminal)
    try:
        shown = _read_until(controller, b"Forget 1 entry?")
        os.write(controller, answer + b"\n")
        assert child.wait(timeout=20) == (0 if forgotten else 1)
    finally:
        os.close(controller)
        if child.poll() is None:
            child.kill()
    assert b"project:project/uv.md" in shown
    assert path.exists() is not forgotten


# --- dream and log ---------------------------------------------------------------------------


def test_log_says_so_when_nothing_was_recorded(cli: Cli) -> None:
    result = cli("log")

    assert result.exit_code == 0
    assert "No memory changes recorded yet." in result.output


def test_log_shows_forget_and_restore_newest_first(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="install with uv", body="Use uv.")
    cli("forget", "install with uv", "--yes")
    cli("restore")

    result = cli("log")

    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "project/uv.md" in line]
    assert [("restore" in row, "forget" in row) for row in rows] == [(True, False), (False, True)]


def test_dream_needs_a_model_endpoint(cli: Cli) -> None:
    result = cli("dream")

    assert result.exit_code == 41
    assert "Dream needs a model endpoint" in result.output


def test_dream_shows_its_steps_and_a_summary(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="install with uv", body="Use uv.")
    with ScriptedServer() as server:
        server.handler = lambda r: Reply(text="All tidy.") if r.purpose == "dream" else None
        cli.use_endpoint(server)
        result = cli("dream")
        [request] = server.requests_for("dream")

    assert result.exit_code == 0, result.output
    assert "Reading 1 project memories" in result.output
    assert "Dream finished: no changes" in result.output and "Summary: All tidy." in result.output
    assert "project/uv.md" in (request.system or "")


def test_dream_exits_nonzero_while_another_process_holds_the_lock(cli: Cli) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    state = memory_roots(cli.project, environ={"CAIRN_HOME": str(cli.home)}).state_dir
    state.mkdir(parents=True, exist_ok=True)
    (state / "consolidation.lock").write_text(f"{holder.pid}\n")
    try:
        with ScriptedServer() as server:
            cli.use_endpoint(server)
            result = cli("dream")
            assert server.requests_for("dream") == []
    finally:
        holder.kill()
        holder.wait()

    assert result.exit_code == 1
    assert "already running" in result.output


def test_export_then_import_of_the_edited_folder_updates_the_memory(
    cli: Cli, tmp_path: Path
) -> None:
    kept = cli.write("uv", title="Use uv", description="Install with uv")
    gone = cli.write("pip", title="No pip", description="Never pip")
    folder = tmp_path / "out"

    exported = cli("export", str(folder))

    assert exported.exit_code == 0, exported.output
    assert f"Exported 2 memories written to {folder}." in exported.output
    (folder / "project/project/uv.md").write_text(
        kept.read_text().replace("Install with uv", "Install with uv sync")
    )
    (folder / "project/project/pip.md").unlink()
    (folder / "project/project/junk.md").write_text("not a memory\n")
    imported = cli("import", str(folder))
    assert imported.exit_code == 0, imported.output
    assert "skipped: project:project/junk.md: " in imported.output
    assert "Imported: 1 memory written, 1 moved to the trash, 1 skipped." in imported.output
    assert "Install with uv sync" in kept.read_text() and not gone.exists()
    assert "import" in cli("log").output
    assert cli("restore").exit_code == 0 and gone.exists()


def test_export_into_a_folder_that_holds_files_is_refused(cli: Cli, tmp_path: Path) -> None:
    cli.write("uv", title="Use uv", description="Install with uv")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    result = cli("export", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert "is not empty: export into a new or empty folder" in result.output
    _no_traceback(result)


def test_migrate_to_postgres_then_the_postgres_backend_holds_the_memory(
    cli: Cli, postgres_dsn: str
) -> None:
    path = cli.write("uv", title="Use uv", description="Install with uv")
    cli.env["CAIRN_MEMORY_DSN"] = postgres_dsn

    result = cli("migrate", "--to", "postgres")

    assert result.exit_code == 0, result.output
    assert "Copied 1 memory copied (" in result.output
    assert 'Set memory.backend to "postgres" to use it.' in result.output
    path.unlink()  # the files are gone: what is listed now comes from the database
    cli.home.mkdir(exist_ok=True)
    (cli.home / "settings.json").write_text(json.dumps({"memory": {"backend": "postgres"}}))
    listed = cli("list")
    assert listed.exit_code == 0, listed.output
    assert "Use uv" in listed.output
    again = cli("migrate", "--to", "postgres")
    assert again.exit_code == 1 and "already holds 1 project memory" in again.output


def test_a_postgres_backend_that_cannot_be_opened_fails_the_command_with_the_reason(
    cli: Cli,
) -> None:
    cli.home.mkdir()
    (cli.home / "settings.json").write_text(json.dumps({"memory": {"backend": "postgres"}}))
    result = cli("list")
    assert result.exit_code == 1
    assert "no database is configured" in result.output
    _no_traceback(result)


def test_list_forgotten_shows_the_tombstones_until_restore_removes_them(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv", body="Use uv, never pip.")
    assert "Nothing is forgotten" in cli("list", "--forgotten").output
    assert cli("forget", "install with uv", "--yes").exit_code == 0

    listed = cli("list", "--forgotten")

    assert listed.exit_code == 0, listed.output
    [row] = [line for line in listed.output.splitlines() if "Use uv" in line]
    assert "project/uv.md" in row and "Use uv, never pip." in row and "install with uv" in row
    assert cli("restore").exit_code == 0
    assert "Nothing is forgotten" in cli("list", "--forgotten").output


def _learned(cli: Cli, name: str, title: str, evidence: str) -> Path:
    """A project memory stamped as a memory agent writes it, with evidence hashed now."""
    from cairn.memory.trust.provenance import Author, stamp

    path = cli.root / "project" / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (
        f"---\nname: {title}\ndescription: {title}\ntype: project\nevidence: [{evidence}]\n"
        f"verified_by: make check\n---\n\n{title}.\n"
    )
    author = Author("extract", "3f2a9c1e-0000", 3, cli.project, cli.root)
    path.write_text(stamp(text, previous=None, author=author, path=path).content)
    return path


def test_list_stale_and_verify_show_memories_whose_evidence_changed(cli: Cli) -> None:
    (cli.project / "Makefile").write_text("check:\n\tpytest\n")
    (cli.project / "setup.cfg").write_text("[tool]\n")
    _learned(cli, "tests", "Tests run with make check", "Makefile")
    _learned(cli, "config", "Config lives in setup.cfg", "setup.cfg")
    cli.write("plain", title="No provenance", description="written by hand")
    assert "No memory is stale" in cli("list", "--stale").output

    (cli.project / "Makefile").write_text("check:\n\ttox\n")
    listed = cli("list", "--stale")
    verified = cli("verify")

    assert listed.exit_code == 0, listed.output
    [row] = [line for line in listed.output.splitlines() if "project/tests.md" in line]
    assert "possibly stale" in row and "from Makefile, which has changed since" in row
    assert "setup.cfg" not in listed.output and "No provenance" not in listed.output
    assert verified.exit_code == 0, verified.output
    assert "2 memories with evidence: 1 current, 1 possibly stale, 0 cannot be verified." in (
        verified.output
    )


def test_show_says_where_a_memory_came_from(cli: Cli) -> None:
    (cli.project / "Makefile").write_text("check:\n\tpytest\n")
    _learned(cli, "tests", "Tests run with make check", "Makefile")
    (cli.project / "Makefile").unlink()

    shown = cli("show", "project/tests.md")

    assert shown.exit_code == 0, shown.output
    assert "learned by extract in session 3f2a9c1e, turn 3 on " in shown.output
    assert "verified by: make check" in shown.output
    assert "evidence: Makefile (sha256 " in shown.output
    assert "possibly stale: learned on " in shown.output
    assert "from Makefile, which has been deleted or moved since" in shown.output


def test_log_of_a_memory_shows_each_version_as_a_diff_and_restore_writes_one_back(
    cli: Cli,
) -> None:
    path = cli.write("uv", title="Use uv", description="Install with uv", body="Use uv, never pip.")
    assert cli("forget", "install with uv", "--yes").exit_code == 0
    assert cli("restore").exit_code == 0
    path.write_text(path.read_text().replace("never pip", "never pip or poetry"))  # by hand

    shown = cli("log", "project/uv.md")

    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == "project:project/uv.md: 4 versions, newest first"
    heads = [line.split("  ")[0] for line in lines if line.startswith("v")]
    assert heads == ["v4", "v3", "v2", "v1"]
    assert "changed outside cairn (by hand or another tool), not yet recorded" in shown.output
    assert "  -Use uv, never pip." in lines and "  +Use uv, never pip or poetry." in lines
    assert "  restored from the trash" in lines and "  forgotten: install with uv" in lines
    assert "  deleted" in lines

    restored = cli("restore", "project/uv.md", "--version", "1")

    assert restored.exit_code == 0, restored.output
    assert "Restored version 1 of project:project/uv.md (recorded as version 5)." in restored.output
    assert "never pip or poetry" not in path.read_text() and "Use uv" in path.read_text()
    assert cli("restore", "project/uv.md", "--version", "2").exit_code == 1  # v2: the deletion


def test_log_of_a_deleted_memory_still_shows_its_versions(cli: Cli) -> None:
    cli.write("uv", title="Use uv", description="Install with uv", body="Use uv.")
    assert cli("forget", "install with uv", "--yes").exit_code == 0

    shown = cli("log", "project:project/uv.md")

    assert shown.exit_code == 0, shown.output
    assert "2 versions" in shown.output and "forgotten: install with uv" in shown.output
    assert cli("log", "no-such-memory").exit_code == 1


def test_a_tenant_named_with_capitals_is_refused_not_read_as_another(cli: Cli) -> None:
    """#24 follow-up: ``cairn memory --tenant Acme`` read the folder ``tenants/Acme``, which
    on a case-insensitive file system is tenant ``acme``'s; tenant names are lower-case, as
    the daemon reads them, and a name with capitals is an error naming the lower-case one."""
    acme = cli.home / "tenants" / "acme"
    roots = memory_roots(cli.project, environ={"CAIRN_MEMORY_BASE_DIR": str(acme)})
    assert roots.project is not None
    cli.write("billing", title="Billing", description="monthly", root=roots.project)

    own = cli("--tenant", "acme", "list")
    refused = cli("--tenant", "Acme", "list")

    assert own.exit_code == 0 and "Billing" in own.output
    assert refused.exit_code != 0
    assert "a tenant name is lower-case ('acme')" in refused.output
    assert "Billing" not in refused.output
    assert not (cli.home / "tenants" / "Acme").exists()


@pytest.mark.parametrize(
    "command",
    [
        ("list",),
        ("show", "project/uv.md"),
        ("search", "install"),
        ("verify",),
        ("recall", "install it"),
    ],
    ids=lambda command: command[0],
)
def test_a_command_that_read_a_changed_memory_again_saves_it_for_the_next(
    cli: Cli, command: tuple[str, ...]
) -> None:
    """Bug: only `list` closed its memory manager; show, search, verify and recall read a
    memory changed on disk again, then left without saving the index, so every later command
    read it again too. (`reindex` counts the memories it had to read again.)"""
    path = cli.write("uv", title="Use uv", description="Install with uv")
    cli.write("docker", title="Docker compose", description="Compose v2 only")
    _saved(cli)
    stamp = path.stat().st_mtime
    path.write_text("---\nname: Use uv always\ndescription: Install with uv only\n"
                    "type: project\n---\n\nbody\n")  # fmt: skip
    os.utime(path, (stamp, stamp))
    result = cli(*command)
    assert result.exit_code == 0, result.output
    assert "Indexed 2 memories (0 read again)" in cli("reindex").output
