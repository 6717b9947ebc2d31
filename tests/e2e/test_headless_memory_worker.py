"""``cairn -p`` returns with its answer and a detached worker saves the turn's memory (issue 32):
the memory is written after the command has exited, and a worker that dies loses nothing (the
project's next session extracts the session from its recording)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
from pathlib import Path

import pytest

from cairn.memory.paths import memory_roots
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call

from ..memory.memory_helpers import unstamped
from ..polling import eventually
from .conftest import RunCairn, extract_workers, wait_for_extract_workers, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PROMPT = "Remember that our staging cluster is called MARKER-ORCA-7731."
MEMORY = """---
name: Staging cluster
description: The staging cluster's name
type: project
---

The staging cluster is called MARKER-ORCA-7731.
"""


def model(memory_root: Path, hold: threading.Event | None = None) -> object:
    """Answers the prompt; the extraction writes one memory, its first answer held by ``hold``
    until the test sets it."""

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "extract":
            if request.messages[-1].get("role") == "tool":
                return reply("Saved.")
            target = memory_root / "project" / "staging-cluster.md"
            answer = tool_call("write_file", {"file_path": str(target), "content": MEMORY})
            return answer if hold is None else dataclasses.replace(answer, hold=hold)
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        return reply("Noted.")

    return handle


def memory_root(project: Path, env: dict[str, str]) -> Path:
    write_settings(project, {"memory": {"enableManagedAutoMemory": True}})
    root = memory_roots(project, environ=env).project
    assert root is not None
    return root


def test_p_exits_with_its_answer_and_a_worker_saves_the_memory_after(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    """Issue 32: `cairn -p` kept the user's command waiting for its Extract after the answer
    was out. Here the extraction's answer is held until the command has exited: a command that
    waited for it would never return."""
    root = memory_root(project, cairn_env)
    release = threading.Event()
    scripted_server.handler = model(root, hold=release)  # type: ignore[assignment]

    done = run_cairn("-p", PROMPT)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Noted.\n"
    assert "Saving memory" not in done.stderr
    saved = root / "project" / "staging-cluster.md"
    assert not saved.exists()
    [extract] = scripted_server.wait_for_requests(1, purpose="extract", timeout=60)
    [main] = scripted_server.requests_for("main")
    assert extract.session_id == main.session_id
    assert extract.contains("MARKER-ORCA-7731")
    assert extract_workers(project)  # the worker waits for the held answer

    release.set()

    wait_for_extract_workers(project)
    assert unstamped(saved.read_text()) == MEMORY
    assert "staging-cluster.md" in (root / "MEMORY.md").read_text()
    state = memory_roots(project, environ=cairn_env).state_dir
    assert json.loads((state / "extract-pending.json").read_text())["sessions"] == []
    assert list((state / "extract-claims").iterdir()) == []


def test_a_worker_killed_mid_extraction_leaves_the_session_to_the_next_one(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    root = memory_root(project, cairn_env)
    never = threading.Event()  # the worker's extraction never gets its answer
    scripted_server.handler = model(root, hold=never)  # type: ignore[assignment]
    first = run_cairn("-p", PROMPT)
    assert first.returncode == 0, first.stderr
    [extract] = scripted_server.wait_for_requests(1, purpose="extract", timeout=60)
    [worker] = extract_workers(project)

    os.kill(worker, signal.SIGKILL)
    assert eventually(lambda: not extract_workers(project))
    never.set()  # from now on every extraction is answered at once
    second = run_cairn("-p", "What is new?")

    assert second.returncode == 0, second.stderr
    wait_for_extract_workers(project)
    retried = [
        r for r in scripted_server.requests_for("extract")[1:] if r.session_id == extract.session_id
    ]
    assert retried and retried[0].contains("MARKER-ORCA-7731")
    assert unstamped((root / "project" / "staging-cluster.md").read_text()) == MEMORY


def test_a_claimed_session_is_left_to_its_worker_by_the_next_command(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    """While the first command's worker still extracts its session, the next command's worker
    does not extract that session a second time."""
    root = memory_root(project, cairn_env)
    release = threading.Event()
    scripted_server.handler = model(root, hold=release)  # type: ignore[assignment]
    first = run_cairn("-p", PROMPT)
    assert first.returncode == 0, first.stderr
    [extract] = scripted_server.wait_for_requests(1, purpose="extract", timeout=60)

    second = run_cairn("-p", "What is new?")
    assert second.returncode == 0, second.stderr
    scripted_server.wait_for_requests(2, purpose="extract", timeout=60)  # the second's own
    release.set()
    wait_for_extract_workers(project)

    firsts = [
        r for r in scripted_server.requests_for("extract") if r.session_id == extract.session_id
    ]
    assert [r.messages[-1].get("role") for r in firsts] == ["user", "tool"]  # one extraction
    assert unstamped((root / "project" / "staging-cluster.md").read_text()) == MEMORY


def test_wait_memory_saves_it_before_exiting(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    root = memory_root(project, cairn_env)
    scripted_server.handler = model(root)  # type: ignore[assignment]

    done = run_cairn("-p", PROMPT, "--wait-memory")

    assert done.returncode == 0, done.stderr
    assert not extract_workers(project)
    assert unstamped((root / "project" / "staging-cluster.md").read_text()) == MEMORY


def test_wait_memory_and_no_wait_memory_together_are_refused(run_cairn: RunCairn) -> None:
    done = run_cairn("-p", PROMPT, "--wait-memory", "--no-wait-memory")

    assert done.returncode != 0
    assert "--wait-memory and --no-wait-memory cannot be given together" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_worker_of_a_trusted_run_is_trusted_too(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    """`cairn -p --trust` reads the project's settings as trusted: its worker must read the
    same settings (endpoint, memory backend), so it is started with --trust too."""
    root = memory_root(project, cairn_env)
    release = threading.Event()
    scripted_server.handler = model(root, hold=release)  # type: ignore[assignment]

    done = run_cairn("-p", PROMPT, "--trust")

    assert done.returncode == 0, done.stderr
    scripted_server.wait_for_requests(1, purpose="extract", timeout=60)
    [worker] = extract_workers(project)
    command = Path(f"/proc/{worker}/cmdline").read_bytes().split(b"\0")
    assert b"--trust" in command
    release.set()
    wait_for_extract_workers(project)
    assert unstamped((root / "project" / "staging-cluster.md").read_text()) == MEMORY


def test_a_project_used_only_through_p_is_consolidated_by_a_worker(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    """`cairn -p` scheduled Dream and cancelled it at exit: a project used only through it never
    consolidated. Its worker now runs Dream once Dream's gates pass (here: the sixth session,
    five recorded before it)."""
    write_settings(project, {"memory": {"minAvailableMemoryMb": 0}})
    root = memory_roots(project, environ=cairn_env).project
    assert root is not None
    scripted_server.handler = model(root)  # type: ignore[assignment]  # Dream: "Noted."

    for number in range(6):
        done = run_cairn("-p", f"{PROMPT} (session {number})")
        assert done.returncode == 0, done.stderr
        wait_for_extract_workers(project)
        assert len(scripted_server.requests_for("dream")) == (1 if number == 5 else 0)

    state = memory_roots(project, environ=cairn_env).state_dir
    meta = json.loads((state / "meta.json").read_text())  # written once a Dream has finished
    assert meta["lastDreamSessionId"] == scripted_server.requests_for("main")[-1].session_id
