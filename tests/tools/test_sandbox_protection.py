"""Under real bubblewrap, what runs later outside the sandbox stays as it was (tools/sandbox.py).

The regression tests of each way in are in tests/e2e/test_sandbox_escapes.py (real cairn
processes); here: git inside the sandbox, linked worktrees, settings that cannot loosen the
protection, the stand-ins of absent entries, and a property test that runs random sequences of
file operations over the protected set and checks that nothing that runs later changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.abort import AbortController
from cairn.config.settings import SandboxSettings
from cairn.tools.base import ToolContext, ToolResult
from cairn.tools.protected import PROJECT_ENTRIES
from cairn.tools.sandbox import SandboxPolicy, sandbox_policy
from cairn.tools.shell import ShellTool

from ..git_helpers import git, make_repository

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

HOOK = "./scripts/notify.sh"
SERVER = "python3 tools/server.py"


@pytest.fixture
def base(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Outside /tmp (the sandbox's /tmp is its own), with a home and a cairn home inside."""
    folder = Path(tempfile.mkdtemp(prefix="cairn-protect-test-", dir="/var/tmp"))
    (folder / "home").mkdir()
    (folder / "cairn-home").mkdir()
    monkeypatch.setenv("HOME", str(folder / "home"))
    monkeypatch.setenv("CAIRN_HOME", str(folder / "cairn-home"))
    monkeypatch.delenv("CAIRN_SANDBOX", raising=False)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _project(root: Path) -> Path:
    """A git repository with project settings, a hook script and an MCP server script."""
    make_repository(root, {"README.md": "# p\n", "scripts/notify.sh": "#!/bin/sh\n"})
    (root / "tools").mkdir()
    (root / "tools" / "server.py").write_text("print('server')\n")
    (root / ".cairn").mkdir()
    (root / ".cairn" / "settings.json").write_text("{}\n")
    return root


def _policy(workspace: Path, **settings: object) -> SandboxPolicy:
    policy = sandbox_policy(
        SandboxSettings.model_validate({"enabled": True, **settings}),
        workspace=workspace,
        run_later=[(HOOK, workspace), (SERVER, workspace)],
    )
    assert policy is not None
    return policy


def _run(command: str, workspace: Path, policy: SandboxPolicy) -> ToolResult:
    ctx = ToolContext(
        workspace=workspace, abort=AbortController().signal, shell_timeout=30, sandbox=policy
    )
    return asyncio.run(ShellTool().execute({"command": command}, ctx))


def _text(result: ToolResult) -> str:
    return result.output if result.ok else str(result.error)


def _fingerprint(path: Path) -> str:
    """Every entry below ``path`` (itself included): name, type, mode, content or link."""
    digest = hashlib.sha256()
    if not os.path.lexists(path):
        return "absent"
    entries = [path]
    if path.is_dir() and not path.is_symlink():
        entries += sorted(path.rglob("*"))
    for entry in entries:
        info = entry.lstat()
        digest.update(f"{entry.relative_to(path.parent)}\0{info.st_mode:o}\0".encode())
        if entry.is_symlink():
            digest.update(os.readlink(entry).encode())
        elif entry.is_file():
            digest.update(entry.read_bytes())
    return digest.hexdigest()


def _runs_later(root: Path) -> dict[str, str]:
    """What runs later outside the sandbox: the project entries and the scripts named."""
    watched = [*PROJECT_ENTRIES, "scripts/notify.sh", "tools/server.py"]
    return {name: _fingerprint(root / name) for name in watched}


def test_git_reads_work_inside_the_sandbox_and_its_writes_are_refused(base: Path) -> None:
    workspace = _project(base / "work")
    (workspace / "README.md").write_text("# changed\n")

    result = _run(
        "git status --short; git log --oneline | wc -l; git add README.md; "
        "git commit -qm x || echo COMMIT-REFUSED",
        workspace,
        _policy(workspace),
    )

    text = _text(result)
    assert " M README.md" in text and "\n1\n" in text
    assert "COMMIT-REFUSED" in text and "Read-only file system" in text
    assert git(workspace, "log", "--oneline").count("\n") == 1


def test_a_linked_worktrees_git_folders_stay_read_only(base: Path) -> None:
    """The workspace is a linked worktree whose repository is writable too (a writable path):
    the folder its `.git` file names and the common folder are protected as `.git` is."""
    main = _project(base / "main")
    git(main, "worktree", "add", "-q", str(base / "linked"))
    linked = base / "linked"
    before = _fingerprint(main / ".git")

    result = _run(
        f"echo evil >> {main}/.git/config; echo ../.. > {main}/.git/worktrees/linked/commondir; "
        f"echo x > {main}/.git/hooks/post-checkout; echo gitdir: /x > .git; echo ok > ok.txt",
        linked,
        _policy(linked, writablePaths=[str(main)]),
    )

    assert _text(result).count("Read-only file system") == 4
    assert _fingerprint(main / ".git") == before
    assert (linked / ".git").read_text().startswith("gitdir: ")
    assert (linked / "ok.txt").exists()


def test_writable_paths_cannot_loosen_what_runs_later(base: Path) -> None:
    workspace = _project(base / "work")
    before = _runs_later(workspace)

    result = _run(
        "echo evil >> .git/config; echo evil > scripts/notify.sh; echo '{}' > .mcp.json",
        workspace,
        _policy(workspace, writablePaths=[".git", "scripts", "."]),
    )

    text = _text(result)
    assert text.count("Read-only file system") == 2 and ".mcp.json: Is a directory" in text
    assert _runs_later(workspace) == before


def test_secrets_stay_hidden_under_a_writable_home(base: Path) -> None:
    """Regression: a writable path bound after the secrets were hidden uncovered the ones
    inside it (`writablePaths: ["~"]` showed ~/.ssh)."""
    home = base / "home"
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    workspace = _project(base / "work")

    result = _run("cat ~/.ssh/id_ed25519", workspace, _policy(workspace, writablePaths=["~"]))

    assert "PRIVATE KEY" not in _text(result)


def test_stand_ins_are_gone_after_the_command_and_take_nothing_with_them(base: Path) -> None:
    workspace = _project(base / "work")
    absent = [name for name in PROJECT_ENTRIES if not (workspace / name).exists()]
    assert absent == [".claude", ".qwen", ".agents", ".mcp.json"]

    result = _run(
        "ls -d " + " ".join(absent) + "; touch .mcp.json .claude/x || echo REFUSED",
        workspace,
        _policy(workspace),
    )

    assert "REFUSED" in _text(result)
    assert not any(os.path.lexists(workspace / name) for name in absent)


def test_what_a_sandboxed_command_can_change(base: Path) -> None:
    workspace = _project(base / "work")
    policy = _policy(workspace, readOnlyPaths=["docs"], hiddenPaths=["secret"])
    for name in ("README.md", "src/new.py", "scripts/other.sh"):
        assert policy.can_change(workspace / name), name
    for name in (".git/config", ".cairn/settings.json", ".mcp.json", "scripts/notify.sh",
                 "tools/server.py", "docs/a.md", "secret/key"):  # fmt: skip
        assert not policy.can_change(workspace / name), name
    assert not policy.can_change(base / "home" / "x")


# ----- the property: no sequence of operations changes what runs later -----

_FILES = (
    ".git/config", ".git/commondir", ".git/config.worktree", ".git/hooks/pre-commit", ".git/HEAD",
    ".git/info/attributes", ".git/modules/m/config", ".cairn/settings.json", ".mcp.json",
    ".claude/settings.json", ".qwen/settings.json", ".agents/x.md", "scripts/notify.sh",
    "tools/server.py", "README.md",
)  # fmt: skip
_FOLDERS = (
    ".git", ".git/hooks", ".git/info", ".git/worktrees", ".cairn", ".cairn/commands", ".claude",
    ".qwen", ".agents", "scripts", "tools", "docs",
)  # fmt: skip
_ANY = _FILES + _FOLDERS
# Each step is one way to change what is at a path: in place, by removing or renaming it (or a
# folder on the way) and putting another in its place, through a link, or with git itself.
_OPERATIONS = (  # (command, where {x} is taken from, where {y} is taken from)
    ("echo evil > {x}", _FILES, _ANY),
    ("printf '[core]\\n\\tfsmonitor = touch /pwned\\n' >> {x}", _FILES, _ANY),
    ("rm -rf {x}", _ANY, _ANY),
    ("mv {x} {y}", _FOLDERS, _ANY),
    ("mv {x} moved; mkdir -p {x}; echo evil > {y}", _FOLDERS, _FILES),
    ("cp -r {x} copy; echo evil > copy/config; rm -rf {x}; mv copy {x}", _FOLDERS, _ANY),
    ("rm -rf {x}; ln -sfn $PWD/moved {x}; mkdir -p moved; echo evil > moved/config", _ANY, _ANY),
    ("ln -sfn {y} {x}", _ANY, _ANY),
    ("mkdir -p {x}/deeper && echo evil > {x}/deeper/x", _FOLDERS, _ANY),
    ("chmod -R 777 {x}; touch {x}", _ANY, _ANY),
    ("git init -q {x}", _FOLDERS, _ANY),
    ("mv .git moved; git init -q . ; git config core.fsmonitor 'touch /pwned'", _ANY, _ANY),
    ("git config --file {x} core.hooksPath scripts", _FILES, _ANY),
)
_STEP = st.sampled_from(_OPERATIONS).flatmap(
    lambda op: st.builds(
        lambda x, y: op[0].format(x=x, y=y), st.sampled_from(op[1]), st.sampled_from(op[2])
    )
)


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("CAIRN_SANDBOX_EXAMPLES", "60")),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_STEP, min_size=1, max_size=10))
def test_no_sequence_of_file_operations_changes_what_runs_later(
    base: Path, steps: list[str]
) -> None:
    """Issue 24's class: sandbox escapes against "nothing runs later outside". Random commands
    over the protected set (written, appended, removed, renamed, replaced by links, copied over,
    re-created with git) leave every project entry, the git folder and the scripts that hooks
    and MCP servers run exactly as they were, and create none that was absent."""
    workspace = base / "work"
    shutil.rmtree(workspace, ignore_errors=True)
    _project(workspace)
    before = _runs_later(workspace)

    result = _run("; ".join(steps) + "; true", workspace, _policy(workspace))

    assert result.ok, result.error
    assert _runs_later(workspace) == before, steps
