"""The trusted-folders check keeps what a project's files would run while none of them changed
(cairn.config.trust, ``COMMANDS_CACHE``); an edit to any file it read, made between two
sessions, changes the next session's decision at once.

Each kind of input gets a project of its own, trusted with its commands, whose listing is kept
before the first session (the files older than a timestamp's granularity, as in a daemon that
has run a while). The first session's ``/stamp`` runs its granted step unasked; the file is
edited; the second session of the same runtime is asked, because the folder's commands changed
(or, for the user's settings, is no longer asked: the folder became trusted).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairn.config.settings import Settings
from cairn.config.trust import commands_kept, forget_folder, project_trust, trust_folder
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest
from cairn.testing import ScriptedFrontend, ScriptedProvider, reply

from ..polling import eventually

# Its step asks unless granted; it writes below out/, which the check does not read.
STAMP = "---\nallowed-tools: Bash(touch *)\n---\nStamp: !`touch out/stamped`"
NETWORK = "CAIRN_TEST_TRUST_NETWORK"  # read by the project settings as `$VAR`


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _hooks(command: str) -> dict[str, object]:
    return {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}


def _project(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    settings = {
        "hooks": _hooks("python hooks/check.py"),
        "tools": {"sandbox": {"network": f"${NETWORK}"}},
    }
    _write(root / ".cairn" / "settings.json", json.dumps(settings))
    _write(root / "hooks" / "check.py", "print('checked')\n")
    (root / "out").mkdir()
    _write(root / ".claude" / "settings.json", json.dumps({"hooks": _hooks("echo stop")}))
    _write(root / ".cairn" / "commands" / "stamp.md", STAMP)
    _write(root / ".cairn" / "commands" / "sub" / "deep.md", "---\nallowed-tools: Grep\n---\nx")
    return root


def _edit_cairn_settings(root: Path) -> None:
    path = root / ".cairn" / "settings.json"
    settings = json.loads(path.read_text())
    settings["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": "echo more"}]})
    path.write_text(json.dumps(settings))


def _edit_user_settings(root: Path) -> None:
    home = Path(root.parent / "cairn-home")
    _write(home / "settings.json", json.dumps({"security": {"trustedFolders": [str(root)]}}))


# kind of input -> (how it is edited, whether the folder is trusted before the edit)
EDITS: dict[str, tuple[Callable[[Path], None], bool]] = {
    "project settings (.cairn/settings.json)": (_edit_cairn_settings, True),
    "Claude settings (.claude/settings.json)": (
        lambda r: _write(r / ".claude" / "settings.json", json.dumps({"hooks": _hooks("echo x")})),
        True,
    ),
    "Claude local settings, absent before": (
        lambda r: _write(
            r / ".claude" / "settings.local.json", json.dumps({"hooks": _hooks("echo local")})
        ),
        True,
    ),
    ".mcp.json, absent before": (
        lambda r: _write(r / ".mcp.json", json.dumps({"mcpServers": {"s": {"command": "srv"}}})),
        True,
    ),
    "a new command file": (
        lambda r: _write(r / ".cairn" / "commands" / "other.md", "---\nallowed-tools: Read\n---\n"),
        True,
    ),
    "a nested command file": (
        lambda r: _write(
            r / ".cairn" / "commands" / "sub" / "deep.md", "---\nallowed-tools: Grep, Read\n---\nx"
        ),
        True,
    ),
    "an extension folder, absent before": (
        lambda r: _write(
            r / ".claude" / "skills" / "new" / "SKILL.md", "---\nallowed-tools: Read\n---\n"
        ),
        True,
    ),
    "the script a hook runs": (
        lambda r: _write(r / "hooks" / "check.py", "print('changed')\n"),
        True,
    ),
    "the trusted-folders file": (forget_folder, True),
    "the user's settings": (_edit_user_settings, False),
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.setenv(NETWORK, "none")  # allowed without trust
    yield tmp_path


async def _asked(runtime: Runtime) -> bool:
    """Whether a new session's `/stamp` asks before running its granted step."""
    user = ScriptedFrontend(default_permission="reject")
    session = runtime.new_session(frontend=user)

    async def sink(event: object) -> None:
        return None

    try:
        await session.prompt(PromptRequest("/stamp"), sink)
    finally:
        await session.close()
    return bool(user.permission_requests)


def _runtime(root: Path) -> Runtime:
    settings = Settings.model_validate({"memory": {"enableManagedAutoMemory": False}})
    return Runtime(cwd=root, settings=settings, provider=ScriptedProvider(reply("Done.")))


async def test_an_edit_to_any_input_of_the_check_between_two_sessions_changes_the_decision(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots = {kind: _project(home / f"project-{n}") for n, kind in enumerate([*EDITS, "env"])}
    for kind, root in roots.items():
        if kind not in EDITS or EDITS[kind][1]:
            trust_folder(root)

    def all_kept() -> bool:
        return all(project_trust(root) and commands_kept(root) for root in roots.values())

    assert eventually(all_kept)  # the files are older than a timestamp's granularity

    seen: dict[str, tuple[bool, bool, bool]] = {}
    for kind, (edit, _) in EDITS.items():
        root = roots[kind]
        runtime = _runtime(root)
        try:
            before = await _asked(runtime)
            kept = commands_kept(root)  # the next check would use the kept listing
            edit(root)
            seen[kind] = (kept, before, await _asked(runtime))
        finally:
            await runtime.aclose()

    root = roots["env"]
    runtime = _runtime(root)
    try:
        before = await _asked(runtime)
        kept = commands_kept(root)
        monkeypatch.setenv(NETWORK, "full")  # `$VAR`: the sandbox's network needs trust now
        seen["an environment variable the settings read"] = (kept, before, await _asked(runtime))
    finally:
        await runtime.aclose()

    expected = {kind: (True, not trusted, trusted) for kind, (_, trusted) in EDITS.items()}
    expected["an environment variable the settings read"] = (True, False, True)
    assert seen == expected
