"""``cairn -p --wait-memory`` and the memory it saves after answering in its own process: said on
stderr when it takes a while, cut short by Ctrl+C, and then extracted by the next session; and
``--no-wait-memory`` (or the setting), which saves none now. Without either, a worker saves it
(test_headless_memory_worker.py)."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from cairn.memory.paths import memory_roots
from cairn.testing import RecordedRequest, Reply, ScriptedServer, ToolCallSpec, reply, tool_calls

from .conftest import (
    CAIRN,
    RunCairn,
    extract_workers,
    wait_for_extract_workers,
    write_settings,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

FIRST_PROMPT = "Remember that our staging cluster is called MARKER-ORCA-7731."
HOURS = 3600.0  # an extraction that never finishes while a test runs


def model(extract_delay: float) -> object:
    """Answers every prompt; the first extraction takes ``extract_delay`` s, later ones none."""
    extracts = 0

    def handle(request: RecordedRequest) -> Reply | None:
        nonlocal extracts
        if request.purpose == "extract":
            extracts += 1
            return reply("Nothing to save.", delay=extract_delay if extracts == 1 else 0)
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        return reply("Noted.")

    return handle


def memory_on(project: Path, **memory: object) -> None:
    write_settings(project, {"memory": {"enableManagedAutoMemory": True, **memory}})


def test_a_slow_memory_save_is_announced_on_stderr(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """Regression: -p waited up to 30 s after the answer without saying why."""
    memory_on(project)
    scripted_server.handler = model(extract_delay=3)  # type: ignore[assignment]

    done = run_cairn("-p", FIRST_PROMPT, "--wait-memory")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Noted.\n"
    assert "Saving memory… (Ctrl+C skips)" in done.stderr
    assert len(scripted_server.requests_for("extract")) == 1


def test_no_wait_memory_leaves_without_waiting(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    memory_on(project, headlessExtractWaitSeconds=HOURS)
    scripted_server.handler = model(extract_delay=HOURS)  # type: ignore[assignment]

    done = run_cairn("-p", FIRST_PROMPT, "--no-wait-memory")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Noted.\n"
    assert "Saving memory" not in done.stderr
    assert not extract_workers(project)
    assert scripted_server.requests_for("extract") == []  # none started: the next session's
    [main] = scripted_server.requests_for("main")
    state = memory_roots(project, environ=cairn_env).state_dir
    assert json.loads((state / "extract-pending.json").read_text())["sessions"] == [
        main.session_id
    ]


def test_a_wait_of_zero_in_settings_leaves_without_waiting(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    memory_on(project, headlessExtractWaitSeconds=0)
    scripted_server.handler = model(extract_delay=HOURS)  # type: ignore[assignment]

    done = run_cairn("-p", FIRST_PROMPT)

    assert done.returncode == 0, done.stderr
    assert "Saving memory" not in done.stderr


def test_ctrl_c_while_saving_leaves_at_once_and_the_next_session_extracts_it(
    cairn_env: dict[str, str], run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    memory_on(project, headlessExtractWaitSeconds=HOURS)
    scripted_server.handler = model(extract_delay=HOURS)  # type: ignore[assignment]
    process = subprocess.Popen(
        [*CAIRN, "-p", FIRST_PROMPT, "--wait-memory"],
        cwd=project, env=cairn_env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    [first_extract] = scripted_server.wait_for_requests(1, purpose="extract", timeout=60)

    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 0, stderr  # the answer was complete: the turn's exit code
    assert stdout == "Noted.\n"
    assert "Memory not saved: the next session in this project extracts it." in stderr
    assert "Traceback" not in stderr

    second = run_cairn("-p", "What is new?")

    assert second.returncode == 0, second.stderr
    wait_for_extract_workers(project)  # the second's worker extracts the first session too
    retried = [
        r for r in scripted_server.requests_for("extract")[1:]
        if r.session_id == first_extract.session_id
    ]  # fmt: skip
    assert len(retried) == 1
    assert retried[0].contains("MARKER-ORCA-7731")


def test_an_extraction_that_loops_is_said_and_the_next_session_extracts_it_again(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """Issue 33: an Extract agent that ended in a loop left `-p` at "Saving memory…" with
    nothing more, and the session was never extracted again."""
    memory_on(project)

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "extract":  # the same read, over and over
            same = ToolCallSpec("read_file", {"file_path": "/nowhere/MEMORY.md"})
            return tool_calls(*[same] * 6)
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        return reply("Noted.")

    scripted_server.handler = handle

    first = run_cairn("-p", FIRST_PROMPT, "--wait-memory")

    assert first.returncode == 0, first.stderr
    assert first.stdout == "Noted.\n"
    said = [line for line in first.stderr.splitlines() if "Memory was not saved" in line]
    assert said == [
        "Memory was not saved: the extraction agent was stopped by loop protection (the model "
        "kept repeating itself). The next extraction in this project tries again."
    ]
    [failed] = scripted_server.requests_for("extract")

    second = run_cairn("-p", "What is new?")

    assert second.returncode == 0, second.stderr
    wait_for_extract_workers(project)
    retried = [
        r for r in scripted_server.requests_for("extract")[1:] if r.session_id == failed.session_id
    ]
    assert len(retried) == 1 and retried[0].contains("MARKER-ORCA-7731")
