"""A memory of many files, written by real extractions killed with SIGKILL at random moments
(issue #28): the memory and its saved index stay consistent, and what a killed writer never
finished is all that is missing.

The suite runs it at 10,000 memories (large enough for the first scan's worker processes and a
saved index of megabytes, seconds long); ``CAIRN_SCALE_MEMORIES=100000`` runs it at the issue's
100,000 (minutes: filling the folder and its first scan dominate)::

    CAIRN_SCALE_MEMORIES=100000 .venv/bin/pytest -n 0 tests/e2e/test_memory_scale.py
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cairn.memory.paths import memory_roots
from cairn.memory.store.locks import STALE_TEMP_SECONDS

from .conftest import CAIRN, write_settings
from .memory_worker import SHARED_LOG, shared_log_text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

WORKER = Path(__file__).with_name("memory_worker.py")
MEMORIES = int(os.environ.get("CAIRN_SCALE_MEMORIES", "10000"))
TYPES = ("user", "feedback", "project", "reference")
KILLS = 3

_VERIFY = r"""
import json, sys
from pathlib import Path
from cairn.memory.paths import MemoryRoots
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.parse import ParseSkip, parse_memory_file

project, user, state = map(Path, sys.argv[1:4])
relatives = json.loads(sys.argv[4])
store = MemoryStore(MemoryRoots(project, user, state))
report = store.refresh()
found = {}
for relative in relatives:
    doc = store.get(project / relative)
    found[relative] = doc.title if doc is not None else None
files = [p for p in project.rglob("*.md") if p.name != "MEMORY.md"]
torn = [str(p) for p in project.glob("project/w*.md")
        if isinstance(parse_memory_file(p, project, "project"), ParseSkip)]
print(json.dumps({"docs": report.docs, "reparsed": report.reparsed, "files": len(files),
                  "found": found, "torn": torn}))
"""


def fill(root: Path, count: int) -> None:
    """``count`` small memories, as a memory that grew for years looks on disk."""
    old = time.time() - 400 * 86_400
    for folder in TYPES:
        (root / folder).mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for n in range(count):
        kind = TYPES[n % 4]
        text = (
            f"---\nname: Fact {n} about topic {n % 997}\ndescription: detail {n} of area "
            f"{n % 31}\ntype: {kind}\n---\n\nThe fact number {n} concerns area {n % 31}.\n"
        )
        fd = os.open(root / kind / f"m{n:06d}.md", flags, 0o644)
        try:
            os.write(fd, text.encode())
            os.utime(fd, (old + n, old + n))
        finally:
            os.close(fd)


def written(root: Path, worker: int) -> list[int]:
    return sorted(int(p.stem.split("-r")[1]) for p in root.glob(f"project/w{worker}-r*.md"))


def test_extractions_killed_at_random_in_a_large_memory_leave_memory_and_index_consistent(
    cairn_env: dict[str, str], project: Path
) -> None:
    write_settings(project, {"memory": {"semanticCandidates": False, "minAvailableMemoryMb": 0}})
    roots = memory_roots(project, environ=cairn_env)
    root = roots.project
    assert root is not None
    fill(root, MEMORIES)
    (root / SHARED_LOG).write_text(shared_log_text())
    indexed = subprocess.run([*CAIRN, "memory", "reindex"], cwd=project, env=cairn_env,
                             capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert indexed.returncode == 0, indexed.stderr

    chance = random.Random(28)
    completed: dict[int, list[int]] = {}
    for worker in range(1, KILLS + 1):
        child = subprocess.Popen([sys.executable, str(WORKER), str(project), str(worker), "200"],
                                 env=cairn_env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            wanted = chance.randint(2, 5)
            deadline = time.monotonic() + 600
            while len(written(root, worker)) < wanted and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(chance.uniform(0, 0.5))  # somewhere in the next write or between two
            child.send_signal(signal.SIGKILL)
            child.wait(30)
        finally:
            child.kill()
        completed[worker] = written(root, worker)
        assert len(completed[worker]) >= wanted

    # One more extraction, allowed to finish: it repairs what a kill left half done. A killed
    # writer's temp file counts as stale after STALE_TEMP_SECONDS; this writer comes later.
    stale = time.time() - 10 * STALE_TEMP_SECONDS
    for temp in root.rglob(".*.tmp"):
        os.utime(temp, (stale, stale))
    done = subprocess.run([sys.executable, str(WORKER), str(project), "9", "1"], env=cairn_env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert json.loads(done.stdout)["completed"] == 1, done.stdout + done.stderr

    names = {f"project/w{w}-r{r}.md": f"Fact w{w} r{r}" for w, rounds in completed.items()
             for r in rounds}  # fmt: skip
    names["project/w9-r0.md"] = "Fact w9 r0"
    verify = subprocess.run(
        [sys.executable, "-c", _VERIFY, str(root), str(roots.user), str(roots.state_dir),
         json.dumps(list(names))],
        env=cairn_env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert verify.returncode == 0, verify.stderr
    result = json.loads(verify.stdout)
    assert result["torn"] == []  # no memory file was left half written
    assert result["docs"] == result["files"]  # the saved index holds exactly the files
    assert result["reparsed"] <= KILLS * 2  # a torn journal tail costs a file or two, no rebuild
    assert result["found"] == names  # every memory written is in the index
    index = (root / "MEMORY.md").read_text()
    assert "(project/w9-r0.md)" in index and f"of {MEMORIES + len(names) + 1} memories" in index
    assert list(root.rglob(".*.tmp")) == []
