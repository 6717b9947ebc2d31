"""Memory shared by several processes, and processes killed with SIGKILL mid-write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn.memory.paths import memory_roots
from cairn.memory.store.locks import hold_roots
from cairn.testing import Reply, ScriptedServer, reply, tool_call

from ..memory.memory_helpers import unstamped
from ..polling import eventually
from .conftest import CAIRN, extract_workers, wait_for_extract_workers, write_settings
from .memory_worker import SHARED_LOG, audit, shared_log_text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

WORKER = Path(__file__).with_name("memory_worker.py")
PREFERENCE = "I always use pytest for tests, never unittest."
MEMORY = "---\nname: Uses pytest\ndescription: tests with pytest\ntype: feedback\n---\n\nPytest.\n"


def project_memory(project: Path, env: dict[str, str]) -> Path:
    root = memory_roots(project, environ=env).project
    assert root is not None
    return root


def test_four_processes_extracting_into_one_root_lose_nothing(
    cairn_env: dict[str, str], project: Path
) -> None:
    write_settings(project, {})
    root = project_memory(project, cairn_env)
    (root / SHARED_LOG).parent.mkdir(parents=True)
    (root / SHARED_LOG).write_text(shared_log_text())
    workers, rounds = 4, 5

    children = [
        subprocess.Popen([sys.executable, str(WORKER), str(project), str(w), str(rounds)],
                         env=cairn_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for w in range(workers)
    ]  # fmt: skip
    results = [json.loads(child.communicate(timeout=100)[0]) for child in children]

    assert [r["completed"] for r in results] == [rounds] * workers, results
    assert audit(root, workers, rounds) == {
        "lost_files": 0, "corrupt_files": 0, "lost_log_lines": 0, "duplicate_log_lines": 0,
        "missing_index_lines": 0, "temp_files": 0,
    }  # fmt: skip
    trail = (root / ".history.jsonl").read_text().splitlines()
    assert sum(1 for line in trail if json.loads(line)["op"] == "extract") == workers * rounds


def extractor(root: Path) -> object:
    def handle(request: object) -> Reply | None:
        if getattr(request, "purpose", None) != "extract":
            return None
        messages = getattr(request, "messages", [])
        if messages and messages[-1].get("role") == "tool":
            return reply("Saved.")
        return tool_call(
            "write_file", {"file_path": str(root / "feedback" / "pytest.md"), "content": MEMORY}
        )

    return handle


def test_a_kill_mid_write_leaves_no_partial_file_and_no_blocking_lock(
    cairn_env: dict[str, str], project: Path, scripted_server: ScriptedServer
) -> None:
    write_settings(project, {})
    root = project_memory(project, cairn_env)
    target = root / "feedback" / "pytest.md"
    scripted_server.handler = extractor(root)  # type: ignore[assignment]
    scripted_server.default = reply("Noted.")
    paused = {**cairn_env, "CAIRN_TEST_MEMORY_WRITE_PAUSE": "60"}
    first = subprocess.run([*CAIRN, "-p", PREFERENCE], cwd=project, env=paused,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert first.returncode == 0, first.stderr  # its extract worker writes the memory
    try:
        assert eventually(lambda: bool(list(root.glob("feedback/.pytest.md.*.tmp"))))
    finally:
        for worker in extract_workers(project):
            os.kill(worker, signal.SIGKILL)
    assert eventually(lambda: not extract_workers(project))
    crashed_at = time.time() - 10  # the crashed write is a while old when the next run comes
    for temp in root.glob("feedback/.pytest.md.*.tmp"):
        os.utime(temp, (crashed_at, crashed_at))

    assert not target.exists()  # never a partial memory: the temp file was not renamed
    with hold_roots([root], timeout=1):  # the kernel released the dead writer's lock
        pass

    done = subprocess.run([*CAIRN, "-p", PREFERENCE], cwd=project, env=cairn_env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip

    assert done.returncode == 0, done.stderr
    wait_for_extract_workers(project)
    assert unstamped(target.read_text()) == MEMORY
    assert list(root.rglob(".*.tmp")) == []


def test_a_kill_mid_dream_leaves_a_lock_the_next_dream_recovers_from(
    cairn_env: dict[str, str], project: Path, scripted_server: ScriptedServer
) -> None:
    write_settings(project, {})
    state = memory_roots(project, environ=cairn_env).state_dir
    memory = project_memory(project, cairn_env) / "feedback" / "pytest.md"
    memory.parent.mkdir(parents=True)
    memory.write_text(MEMORY)  # something to consolidate: with no memories Dream skips
    slow = reply("Nothing to do.", delay=60)
    scripted_server.handler = lambda r: slow if r.purpose == "dream" else None
    child = subprocess.Popen([*CAIRN, "memory", "dream"], cwd=project, env=cairn_env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        scripted_server.wait_for_requests(1, purpose="dream", timeout=30)
        assert (state / "consolidation.lock").read_text().strip() == str(child.pid)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        child.kill()
    assert (state / "consolidation.lock").exists()  # left behind, holding a dead PID

    scripted_server.handler = lambda r: reply("Nothing to do.") if r.purpose == "dream" else None
    done = subprocess.run([*CAIRN, "memory", "dream"], cwd=project, env=cairn_env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "Dream finished: no changes" in done.stdout
    assert not (state / "consolidation.lock").exists()
    assert os.path.exists(state / "meta.json")
