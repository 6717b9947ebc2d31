"""``cairn -p --sandbox`` and ``CAIRN_SANDBOX=1`` as real processes: commands are fenced."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply, tool_call

from .conftest import RunCairn, write_settings

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)"
)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox's /tmp is private, so /tmp would prove nothing)."""
    folder = Path(tempfile.mkdtemp(prefix="cairn-e2e-sandbox-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _tool_output(server: ScriptedServer) -> str:
    tool = [m for m in server.requests_for("main")[-1].messages if m["role"] == "tool"]
    return str(tool[-1]["content"])


def test_the_sandbox_flag_fences_the_shell_of_a_headless_turn(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, outside: Path
) -> None:
    scripted_server.enqueue(
        tool_call(
            "run_shell_command",
            {"command": f"echo in > inside.txt; echo out > {outside}/escaped.txt; echo done"},
        ),
        reply("Ran it."),
    )

    done = run_cairn("-p", "run it", "--yolo", "--sandbox")

    assert done.returncode == 0, done.stderr
    assert (project / "inside.txt").read_text() == "in\n"
    assert not (outside / "escaped.txt").exists()
    assert "Read-only file system" in _tool_output(scripted_server)


def test_the_environment_variable_and_the_setting_turn_it_on_too(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    outside: Path,
    cairn_env: dict[str, str],
) -> None:
    write_settings(
        project,
        {"memory": {"enableManagedAutoMemory": False}, "tools": {"sandbox": {"enabled": True}}},
    )
    for env in (cairn_env, {**cairn_env, "CAIRN_SANDBOX": "1"}):
        scripted_server.enqueue(
            tool_call("run_shell_command", {"command": f"echo out > {outside}/escaped.txt"}),
            reply("Ran it."),
        )
        done = run_cairn("-p", "run it", "--yolo", env=env)
        assert done.returncode == 0, done.stderr
        assert not (outside / "escaped.txt").exists()


def test_without_bubblewrap_a_sandboxed_run_refuses_commands_naming_the_package(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    cairn_env: dict[str, str],
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("bash", "git", "touch"):
        found = shutil.which(program)
        if found is not None:
            (bin_dir / program).symlink_to(found)
    env = {**cairn_env, "PATH": str(bin_dir), "CAIRN_SANDBOX": "1"}
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "touch ran.txt"}), reply("Could not.")
    )

    done = run_cairn("-p", "run it", "--yolo", env=env)

    assert done.returncode == 0, done.stderr
    output = _tool_output(scripted_server)
    assert "bubblewrap" in output and "was not run" in output
    assert not (project / "ran.txt").exists()


def test_a_sandbox_that_cannot_run_is_said_at_start(
    run_cairn: RunCairn, scripted_server: ScriptedServer, cairn_env: dict[str, str], tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin-without-bwrap"
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to(str(shutil.which("bash")))
    scripted_server.enqueue(reply("Hello."))

    done = run_cairn("-p", "hi", "--sandbox", env={**cairn_env, "PATH": str(bin_dir)})

    assert done.returncode == 0, done.stderr
    assert "the shell sandbox is on but bubblewrap is not installed" in done.stderr
    assert "`apt install bubblewrap`" in done.stderr
