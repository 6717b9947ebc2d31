"""The suite's xdist scheduling and batched reporting (tests/batched_xdist.py): every test runs
once, a group's tests in one worker one after another, and a run reads as it did with xdist's
own ``loadgroup``: failures in full, ``-x``, ``-k`` and ``--lf``."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .batched_xdist import MAX_CHUNK, GroupedChunkScheduling, group_of, work_units

ROOT = Path(__file__).resolve().parents[1]


@dataclass(eq=False)
class _Gateway:
    id: str


@dataclass(eq=False)
class _Worker:
    """What the scheduler reads of xdist's ``WorkerController``, and what a worker does with it:
    runs its tests in order, each once it knows the next one or that it will get no more."""

    name: str
    sent: list[list[int]] = field(default_factory=list)
    shutting_down: bool = False

    def __post_init__(self) -> None:
        self.gateway = _Gateway(self.name)
        self.queue: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(list(indices))
        self.queue.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True

    def runnable(self) -> bool:
        return len(self.queue) >= 2 or (len(self.queue) == 1 and self.shutting_down)


class _Config:
    """What the scheduler reads of pytest's config: ``-n``, as xdist spells it for it."""

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str) -> list[str]:
        assert name == "tx"
        return [f"{self.workers}*popen"]


def _scheduler(workers: list[_Worker], ids: list[str]) -> GroupedChunkScheduling:
    scheduler = GroupedChunkScheduling(_Config(len(workers)))  # type: ignore[arg-type]
    for worker in workers:
        scheduler.add_node(worker)  # type: ignore[arg-type]
        scheduler.add_node_collection(worker, ids)  # type: ignore[arg-type]
    scheduler.schedule()
    return scheduler


def _run(scheduler: GroupedChunkScheduling, workers: list[_Worker]) -> list[tuple[str, int]]:
    """Complete the workers' tests, taking turns, until the scheduler says the run is over."""
    ran: list[tuple[str, int]] = []
    while not scheduler.tests_finished:
        runnable = [worker for worker in workers if worker.runnable()]
        assert runnable, "every worker waits for tests the scheduler never sends"
        for worker in runnable:
            index = worker.queue.pop(0)
            ran.append((worker.name, index))
            scheduler.mark_test_complete(worker, index)  # type: ignore[arg-type]
    for worker in workers:  # each runs the last test it holds once told to end
        ran.extend((worker.name, index) for index in worker.queue)
    return ran


def test_a_group_is_read_from_the_node_id_as_xdist_writes_it() -> None:
    assert group_of("tests/a.py::test_x@postgres") == "postgres"
    assert group_of("tests/a.py::test_x[me@host]") is None
    assert group_of("tests/a.py::test_x[me@host]@g") == "g"
    assert group_of("tests/a.py::test_x") is None


def test_a_groups_tests_are_one_unit_where_its_first_test_stands() -> None:
    ids = ["a::1", "b::1@g", "a::2", "b::2@g", "a::3"]
    assert work_units(range(5), ids) == [[0], [1, 3], [2], [4]]


def test_every_test_runs_once_and_a_group_in_one_worker() -> None:
    ids = [f"tests/m{n // 40}.py::test_{n}" for n in range(1_000)]
    for n in range(3, 1_000, 97):
        ids[n] += "@postgres"
    workers = [_Worker(f"gw{n}") for n in range(4)]
    scheduler = _scheduler(workers, ids)

    ran = _run(scheduler, workers)

    assert sorted(index for _, index in ran) == list(range(1_000))
    assert len({name for name, index in ran if ids[index].endswith("@postgres")}) == 1
    assert all(worker.shutting_down for worker in workers)
    chunks = [len(chunk) for worker in workers for chunk in worker.sent]
    assert max(chunks) <= MAX_CHUNK + 10  # a chunk plus the group that comes with it
    assert len(chunks) < 1_000 / 5  # not a message a test, as xdist's loadgroup sends


def test_a_crashed_workers_tests_go_back_with_their_group_together() -> None:
    ids = [f"tests/m.py::test_{n}" + ("@g" if n % 2 else "") for n in range(12)]
    workers = [_Worker("gw0"), _Worker("gw1")]
    scheduler = _scheduler(workers, ids)
    crashed = next(worker for worker in workers if 1 in worker.queue)

    assert scheduler.remove_node(crashed) == ids[crashed.queue[0]]  # type: ignore[arg-type]
    [other] = [worker for worker in workers if worker is not crashed]
    rest = _run(scheduler, [other])

    assert {index for _, index in rest} | {crashed.queue[0]} == set(range(12))


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    environment["GROUPED_LOG"] = str(tmp_path / "grouped.jsonl")
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
    # xdist and the plugin under test only: loading every installed plugin (hypothesis, asyncio,
    # the snapshots, cairn's fixtures) in the three runs' nine processes was two thirds of the
    # test's CPU (16 s, now 5 s; benchmarks/README.md, issue #25)
    environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    plugins = ["-p", "xdist.plugin", "-p", "tests.batched_xdist"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-n", "2", *args],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


SUITE = """
import json, os, time
import pytest

def test_fails():
    print("what the test printed")
    assert 1 + 1 == 3, "arithmetic is broken"

@pytest.mark.parametrize("n", range(60))
def test_cheap(n):
    pass

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("n", range(6))
def test_grouped(n):
    started = time.time()
    time.sleep(0.05)
    with open(os.environ["GROUPED_LOG"], "a") as log:
        log.write(json.dumps([os.environ["PYTEST_XDIST_WORKER"], started, time.time()]) + "\\n")
"""


@pytest.mark.slow  # starts pytest with two xdist workers, three times
@pytest.mark.timeout(600)
def test_a_run_reads_as_with_xdists_own_loadgroup(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --dist loadgroup\n")

    whole = _pytest(tmp_path)

    assert "1 failed, 66 passed" in whole.stdout, whole.stdout + whole.stderr
    assert "arithmetic is broken" in whole.stdout
    assert "what the test printed" in whole.stdout
    logged = (tmp_path / "grouped.jsonl").read_text().splitlines()
    runs = sorted(json.loads(line) for line in logged)
    assert len(runs) == 6 and len({worker for worker, _, _ in runs}) == 1
    spans = sorted((start, end) for _, start, end in runs)
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))

    again = _pytest(tmp_path, "--lf")
    assert "1 failed" in again.stdout and "passed" not in again.stdout, again.stdout

    (tmp_path / "grouped.jsonl").unlink()
    stopped = _pytest(tmp_path, "-x", "-k", "fails or cheap")  # the failing test comes first
    assert "stopping after 1 failures" in stopped.stdout, stopped.stdout
    assert "60 passed" not in stopped.stdout, stopped.stdout
    assert not (tmp_path / "grouped.jsonl").exists()  # -k left them out
