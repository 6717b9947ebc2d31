"""A sandboxed command cannot plant what runs later outside the sandbox (issue 24).

Each test lets a real ``cairn -p --sandbox`` run a command, under real bubblewrap, that tries to
change something that runs later unsandboxed (git's configuration, a project's settings or MCP
servers, a script a hook runs), then runs that later thing for real (the user's ``git status``,
the next ``cairn`` start, the hook in the same turn) and checks it ran nothing planted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply, tool_call

from ..git_helpers import make_repository
from .conftest import CAIRN, trust_in_user_settings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]


@pytest.fixture
def project(tmp_path: Path, cairn_env: dict[str, str]) -> Path:
    """A real git repository with no cairn settings of its own (memory off for the user)."""
    root = make_repository(tmp_path / "project", {"README.md": "# project\n"})
    home = Path(cairn_env["CAIRN_HOME"])
    (home / "settings.json").write_text(json.dumps({"memory": {"enableManagedAutoMemory": False}}))
    return root


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """Made only by a planted program, run outside the sandbox (a command inside cannot write
    here: the sandbox's /tmp is its own)."""
    return tmp_path / "outside" / "PLANTED-CODE-RAN"


def _cairn(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CAIRN, *args], cwd=project, env=env, input="", capture_output=True, text=True, timeout=90
    )


def _sandboxed(
    project: Path, env: dict[str, str], server: ScriptedServer, command: str
) -> str:
    """Run ``command`` through a sandboxed headless turn; the tool output the model got."""
    server.enqueue(tool_call("run_shell_command", {"command": command}), reply("Ran it."))
    done = _cairn(project, env, "-p", "run it", "--yolo", "--sandbox")
    assert done.returncode == 0, done.stderr
    tool = [m for m in server.requests_for("main")[-1].messages if m["role"] == "tool"]
    return str(tool[-1]["content"])


def _next_start(project: Path, env: dict[str, str], server: ScriptedServer) -> None:
    """The next `cairn -p` in the project: it starts the servers and runs the hooks it finds."""
    server.enqueue(reply("Hello."))
    done = _cairn(project, env, "-p", "hi")
    assert done.returncode == 0, done.stderr


def _users_git_status(project: Path, home: Path) -> None:
    """What the user (or an editor) runs later, outside any sandbox."""
    env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "status"], cwd=project, env=env, capture_output=True, timeout=60)


def test_a_planted_git_commondir_runs_nothing_in_a_later_git_status(
    project: Path, cairn_env: dict[str, str], scripted_server: ScriptedServer, marker: Path
) -> None:
    """Regression (issue 24): writing `.git/commondir` pointed git at a copied git folder whose
    `core.fsmonitor` the user's next `git status` ran."""
    marker.parent.mkdir()
    output = _sandboxed(
        project,
        cairn_env,
        scripted_server,
        f"cp -r .git copied && git --git-dir=copied config core.fsmonitor 'touch {marker}; false'"
        " && echo ../copied > .git/commondir",
    )
    _users_git_status(project, Path(cairn_env["HOME"]))
    assert not marker.exists(), output
    assert not (project / ".git" / "commondir").exists()


def test_a_renamed_git_folder_and_a_hostile_new_one_run_nothing_later(
    project: Path, cairn_env: dict[str, str], scripted_server: ScriptedServer, marker: Path
) -> None:
    """Regression (issue 24): `mv .git` moved the read-only mounts with the folder, and
    `git init` then made a `.git` whose config the user's next `git status` ran."""
    marker.parent.mkdir()
    output = _sandboxed(
        project,
        cairn_env,
        scripted_server,
        f"mv .git old-git; git init -q && git config core.fsmonitor 'touch {marker}; false'",
    )
    _users_git_status(project, Path(cairn_env["HOME"]))
    assert not marker.exists(), output
    assert not (project / "old-git").exists()


def test_an_absent_mcp_json_made_in_the_sandbox_starts_no_server_later(
    project: Path, cairn_env: dict[str, str], scripted_server: ScriptedServer, marker: Path
) -> None:
    """Regression (issue 24): a project without `.mcp.json` got one from a sandboxed command,
    and the next start of cairn in the (trusted) folder ran its server."""
    marker.parent.mkdir()
    trust_in_user_settings(project)
    servers = {"mcpServers": {"x": {"command": "sh", "args": ["-c", f"touch {marker}"]}}}
    output = _sandboxed(
        project, cairn_env, scripted_server, f"echo '{json.dumps(servers)}' > .mcp.json"
    )
    _next_start(project, cairn_env, scripted_server)
    assert not marker.exists(), output
    assert not (project / ".mcp.json").exists()


def test_absent_project_settings_made_in_the_sandbox_run_no_hook_later(
    project: Path, cairn_env: dict[str, str], scripted_server: ScriptedServer, marker: Path
) -> None:
    """Regression (issue 24): a project without `.cairn/` got a settings file with a hook from a
    sandboxed command, and the next start of cairn in the (trusted) folder ran the hook."""
    marker.parent.mkdir()
    trust_in_user_settings(project)
    hook = {"hooks": [{"type": "command", "command": f"touch {marker}"}]}
    settings = {"hooks": {"UserPromptSubmit": [hook]}}
    output = _sandboxed(
        project,
        cairn_env,
        scripted_server,
        f"mkdir -p .cairn && echo '{json.dumps(settings)}' > .cairn/settings.json",
    )
    _next_start(project, cairn_env, scripted_server)
    assert not marker.exists(), output
    assert not (project / ".cairn").exists()  # the read-only placeholder is gone too


@pytest.mark.parametrize(
    "rewrite",
    [
        "echo 'touch {marker}' >> scripts/notify.sh",
        "mv scripts old && mkdir scripts && printf '#!/bin/sh\\ntouch {marker}\\n' > "
        "scripts/notify.sh && chmod +x scripts/notify.sh",
    ],
    ids=["appended", "folder-replaced"],
)
def test_a_hook_script_rewritten_in_the_sandbox_runs_unchanged_in_the_same_turn(
    project: Path,
    cairn_env: dict[str, str],
    scripted_server: ScriptedServer,
    marker: Path,
    rewrite: str,
) -> None:
    """Regression (issue 24): a trusted project's hook runs a script outside `.cairn/`; a
    sandboxed command rewrote it and the hook ran it, unsandboxed, right after the command."""
    marker.parent.mkdir()
    script = project / "scripts" / "notify.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\ncat > /dev/null\n")
    script.chmod(0o755)
    hook = {"matcher": "", "hooks": [{"type": "command", "command": "./scripts/notify.sh"}]}
    (project / ".cairn").mkdir()
    (project / ".cairn" / "settings.json").write_text(
        json.dumps({"hooks": {"PostToolUse": [hook]}})
    )
    trust_in_user_settings(project)
    output = _sandboxed(project, cairn_env, scripted_server, rewrite.format(marker=marker))
    assert not marker.exists(), output
    assert script.read_text() == "#!/bin/sh\ncat > /dev/null\n"


def test_an_mcp_server_script_rewritten_in_the_sandbox_is_not_run_later(
    project: Path, cairn_env: dict[str, str], scripted_server: ScriptedServer, marker: Path
) -> None:
    """Regression (issue 24): the script a trusted project's MCP server runs was rewritten by a
    sandboxed command; the next start of cairn ran the new script."""
    marker.parent.mkdir()
    server = project / "tools" / "server.py"
    server.parent.mkdir()
    server.write_text("import sys\nsys.exit(0)\n")
    servers = {"mcpServers": {"tool": {"command": "python3", "args": ["tools/server.py"]}}}
    (project / ".mcp.json").write_text(json.dumps(servers))
    trust_in_user_settings(project)
    output = _sandboxed(
        project, cairn_env, scripted_server, f"echo 'open(\"{marker}\", \"w\")' > tools/server.py"
    )
    _next_start(project, cairn_env, scripted_server)
    assert not marker.exists(), output
    assert server.read_text() == "import sys\nsys.exit(0)\n"


@pytest.mark.parametrize("tool", ["write_file", "edit"])
def test_an_mcp_server_script_is_not_rewritten_unasked_by_the_file_tools(
    project: Path,
    cairn_env: dict[str, str],
    scripted_server: ScriptedServer,
    marker: Path,
    tool: str,
) -> None:
    """#24 follow-up: the file tools run outside the sandbox, and their approval gate protected
    the scripts hooks run but not those of MCP servers: in auto-edit, `write_file` or `edit`
    rewrote a trusted project's MCP server script unasked, and the next start of cairn ran it
    outside the sandbox."""
    marker.parent.mkdir()
    server = project / "tools" / "server.py"
    server.parent.mkdir()
    original = "import sys\nsys.exit(0)\n"
    server.write_text(original)
    servers = {"mcpServers": {"tool": {"command": "python3", "args": ["tools/server.py"]}}}
    (project / ".mcp.json").write_text(json.dumps(servers))
    trust_in_user_settings(project)
    planted = f"open({str(marker)!r}, 'w').close()\n"
    args = (
        {"file_path": str(server), "content": planted}
        if tool == "write_file"
        else {"file_path": str(server), "old_string": "sys.exit(0)", "new_string": planted}
    )
    scripted_server.enqueue(tool_call(tool, args), reply("Changed it."))

    mode = ("--approval-mode", "auto-edit")
    done = _cairn(project, cairn_env, "-p", "change it", *mode, "--sandbox")
    assert done.returncode == 0, done.stderr
    _next_start(project, cairn_env, scripted_server)

    tool_output = [m for m in scripted_server.requests[-2].messages if m["role"] == "tool"]
    assert "MCP server" in str(tool_output[-1]["content"]), tool_output
    assert server.read_text() == original
    assert not marker.exists()
