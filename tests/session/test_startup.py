"""Start-up: real settings files and recordings in a temporary cairn home, one path for all."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn import telemetry
from cairn.config.trust import trust_folder
from cairn.exit_codes import ExitCode
from cairn.session.startup import (
    NO_EARLIER_SESSION,
    StartupError,
    load_startup,
    open_runtime,
)

BASE_URL = "http://127.0.0.1:9/v1"  # never contacted: start-up opens no connection


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cairn home with an endpoint in the environment; telemetry reset afterwards."""
    folder = tmp_path / "cairn-home"
    folder.mkdir()
    monkeypatch.setenv("CAIRN_HOME", str(folder))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CAIRN_TELEMETRY_FILE", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", BASE_URL)
    monkeypatch.setenv("OPENAI_API_KEY", "key")
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    yield folder
    telemetry.configure()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)
    return folder


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def record_session(home: Path, project: Path, session_id: str, *, mtime: float) -> None:
    """A recording as an earlier session leaves it (one user prompt)."""
    from cairn.config.paths import chats_dir

    path = chats_dir(project) / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "uuid": "u1",
        "parentUuid": None,
        "sessionId": session_id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "type": "user",
        "cwd": str(project),
        "message": {"role": "user", "parts": [{"text": "an earlier question"}]},
    }
    path.write_text(json.dumps(record) + "\n")
    os.utime(path, (mtime, mtime))


# ----- load_startup -----


def test_an_unusable_settings_file_is_a_config_error_naming_the_file(
    home: Path, project: Path
) -> None:
    (home / "settings.json").write_text('{"memory": {"enableManagedAutoMemory": "maybe"}}')

    with pytest.raises(StartupError) as caught:
        load_startup(project)

    assert caught.value.exit_code == ExitCode.CONFIG == 52
    assert "settings.json" in str(caught.value)
    assert "enableManagedAutoMemory" in str(caught.value)


def test_no_endpoint_is_a_no_auth_error_saying_what_to_set(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")

    with pytest.raises(StartupError) as caught:
        load_startup(project)

    assert caught.value.exit_code == ExitCode.NO_AUTH == 41
    assert "OPENAI_API_KEY" in str(caught.value)


def test_without_require_endpoint_a_missing_endpoint_is_reported_not_raised(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")

    startup = load_startup(project, require_endpoint=False)

    assert startup.endpoint is None
    assert startup.auth_error is not None and "OPENAI_API_KEY" in startup.auth_error
    with pytest.raises(StartupError) as caught:
        startup.open_runtime()
    assert caught.value.exit_code == ExitCode.NO_AUTH


def test_unknown_settings_are_warnings_and_the_flags_override_the_settings(
    home: Path, project: Path
) -> None:
    write_json(project / ".cairn" / "settings.json", {"modle": "typo", "model": {"name": "x"}})

    startup = load_startup(project, model="flag-model", max_session_turns=3)

    assert startup.endpoint is not None
    assert startup.endpoint.model == "flag-model"
    assert startup.settings.model.max_session_turns == 3
    [warning] = startup.warnings
    assert "modle" in warning and "ignored" in warning


def test_the_process_telemetry_follows_the_settings(home: Path, project: Path) -> None:
    outfile = home / "events.jsonl"
    write_json(home / "settings.json", {"telemetry": {"outfile": str(outfile)}})

    load_startup(project)
    telemetry.emit("startup.test", value=1)

    [line] = outfile.read_text().splitlines()
    assert json.loads(line)["event"] == "startup.test"


def test_a_project_startup_can_leave_the_process_telemetry_alone(
    home: Path, project: Path
) -> None:
    outfile = home / "events.jsonl"
    write_json(project / ".cairn" / "settings.json", {"telemetry": {"outfile": str(outfile)}})
    trust_folder(project)  # a project's telemetry file needs the folder trusted

    load_startup(project, configure_telemetry=False)
    telemetry.emit("startup.test", value=1)

    assert not outfile.exists()


# ----- open_runtime: the terminal UI's and cairn -p's start -----


async def test_open_runtime_from_a_subfolder_serves_the_project_on_the_resolved_endpoint(
    home: Path, project: Path
) -> None:
    (project / "src").mkdir()

    opened = open_runtime(project / "src")
    try:
        assert opened.runtime.project_root == project.resolve()
        assert opened.runtime.provider.model == "env-model"
        assert opened.resume is None
        assert opened.warnings == ()
    finally:
        await opened.runtime.aclose()


def test_resuming_an_unknown_session_is_bad_input_before_anything_starts(
    home: Path, project: Path
) -> None:
    with pytest.raises(StartupError) as caught:
        open_runtime(project, resume="11111111-2222-4333-8444-555555555555")

    assert caught.value.exit_code == ExitCode.BAD_INPUT == 42
    assert str(caught.value) == 'No session found with ID "11111111-2222-4333-8444-555555555555".'


def test_a_resume_id_that_is_a_path_never_names_a_file(home: Path, project: Path) -> None:
    outside = project.parent / "elsewhere.jsonl"
    outside.write_text("{}\n")

    with pytest.raises(StartupError) as caught:
        open_runtime(project, resume="../../elsewhere")

    assert caught.value.exit_code == ExitCode.BAD_INPUT


async def test_resume_names_a_recorded_session(home: Path, project: Path) -> None:
    session_id = "aaaaaaaa-1111-4111-8111-111111111111"
    record_session(home, project, session_id, mtime=1_700_000_000)

    opened = open_runtime(project, resume=session_id)
    try:
        assert opened.resume == session_id
        assert opened.warnings == ()
    finally:
        await opened.runtime.aclose()


async def test_continue_picks_the_projects_newest_session(home: Path, project: Path) -> None:
    older, newer = "aaaaaaaa-1111-4111-8111-111111111111", "bbbbbbbb-2222-4222-8222-222222222222"
    record_session(home, project, older, mtime=1_700_000_000)
    record_session(home, project, newer, mtime=1_700_000_500)

    opened = open_runtime(project, continue_latest=True)
    try:
        assert opened.resume == newer
    finally:
        await opened.runtime.aclose()


async def test_continue_without_an_earlier_session_starts_a_new_one_and_says_so(
    home: Path, project: Path
) -> None:
    write_json(project / ".cairn" / "settings.json", {"modle": "typo"})

    opened = open_runtime(project, continue_latest=True)
    try:
        assert opened.resume is None
        assert len(opened.warnings) == 2
        assert "modle" in opened.warnings[0]
        assert opened.warnings[1] == NO_EARLIER_SESSION
    finally:
        await opened.runtime.aclose()


@pytest.mark.parametrize(
    ("content", "why"),
    [(None, "No such file or directory"), ("not a certificate\n", "no certificate or crl found")],
    ids=["missing", "no certificate in it"],
)
async def test_an_unusable_node_extra_ca_certs_is_a_start_up_warning(
    home: Path,
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: str | None,
    why: str,
) -> None:
    """Bug: only the debug log said so, in ``cairn -p`` and the terminal UI, which show the
    start-up warnings (stderr, a notice); a user behind a TLS-intercepting proxy saw only the
    certificate error of a later request, if any."""
    extra = tmp_path / "corporate-ca.pem"
    if content is not None:
        extra.write_text(content)
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(extra))

    opened = open_runtime(project)
    try:
        [warning] = opened.warnings
        assert warning.startswith(
            f"NODE_EXTRA_CA_CERTS names {str(extra)!r}, which was not added to the trusted "
            "certificates: "
        )
        assert why in warning
    finally:
        await opened.runtime.aclose()
