"""Trusted folders with real processes: an untrusted project's hook does not run, until trusted."""

from __future__ import annotations

from pathlib import Path

from cairn.testing import ScriptedServer, reply

from .conftest import RunCairn, write_settings


def _hook_settings(project: Path, marker: Path, *, extra: str = "") -> None:
    hook = project / "hook.sh"
    hook.write_text(f"#!/bin/bash\necho ran >> '{marker}'{extra}\n")
    hook.chmod(0o755)
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": str(hook)}]}]},
        },
    )


def _runs(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def test_an_untrusted_projects_hook_runs_only_after_cairn_trust(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "hook-ran"
    _hook_settings(project, marker)
    scripted_server.default = reply("Answered.")

    untrusted = run_cairn("-p", "hello")
    assert untrusted.returncode == 0, untrusted.stderr
    assert _runs(marker) == 0
    assert untrusted.stderr.count("not a trusted folder") == 1
    assert "`cairn trust`" in untrusted.stderr

    trusted = run_cairn("trust")
    assert trusted.returncode == 0, trusted.stderr
    assert "hooks.UserPromptSubmit" in trusted.stdout and "hook.sh" in trusted.stdout

    after = run_cairn("-p", "hello again")
    assert after.returncode == 0, after.stderr
    assert _runs(marker) == 1
    assert "not a trusted folder" not in after.stderr

    _hook_settings(project, marker, extra="  # now it does something else")
    changed = run_cairn("-p", "and again")
    assert _runs(marker) == 1
    assert "changed since you trusted it" in changed.stderr

    once = run_cairn("-p", "once more", "--trust")
    assert once.returncode == 0, once.stderr
    assert _runs(marker) == 2
    [listed] = run_cairn("trust", "--list").stdout.splitlines()
    assert listed.split()[:2] == ["changed", str(project)]  # trusted once, changed since


def test_revoking_trust_turns_the_hook_off_again(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "hook-ran"
    _hook_settings(project, marker)
    scripted_server.default = reply("Answered.")
    assert run_cairn("trust").returncode == 0

    revoked = run_cairn("trust", "--revoke")
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    run_cairn("-p", "hello")

    assert _runs(marker) == 0
    bad = run_cairn("trust", str(tmp_path / "missing"))
    assert bad.returncode == 42 and "is not a folder" in bad.stderr
