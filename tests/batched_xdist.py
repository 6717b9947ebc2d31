"""pytest-xdist's ``loadgroup`` distribution, with tests handed out and reported in batches.

xdist's own ``LoadGroupScheduling`` hands each test without a group to a worker on its own (a
round trip per test) and, on every test completed, counts again every test the worker was ever
given (quadratic in the run); each worker then sends six messages a test (its start, three
reports, its end, "done"). In the quick loop that was most of a cheap test's cost
(benchmarks/README.md, issue #25). Here, with the same meaning:

- **Scheduling** (``GroupedChunkScheduling``, chosen for ``--dist loadgroup``): the tests marked
  ``xdist_group(name)`` are handed to one worker together, as xdist does; the others go out in
  chunks of consecutive tests, at most ``MAX_CHUNK`` at once and fewer as the run nears its end
  (so the workers still end together), and none to a worker already busy with a long test while
  it has two in hand.
- **Reporting:** a worker keeps one test's messages and sends them in one when the test is done
  (or before anything else it sends); the controller unpacks them in order, so every hook, the
  terminal, ``-x``, ``--lf`` and the failure details see what they saw before.

Both halves are xdist's own protocol (``WorkerInteractor.sendevent``,
``WorkerController.process_from_remote``); tests/test_suite.py runs a small suite through them.
"""

from __future__ import annotations

import marshal
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from xdist.remote import WorkerInteractor
from xdist.report import report_collection_diff
from xdist.workermanage import WorkerController, parse_tx_spec_config

MAX_CHUNK = 32  # most tests handed to a worker at once: how unevenly the workers can end
CHUNKS_PER_WORKER = 4  # a chunk is at most this fraction of a worker's share of what is left
LONG_TEST_SECONDS = 0.1  # after a test this long, a worker with two tests in hand gets no more
BATCH_EVENT = "cairn_batch"  # a worker's messages of one test, sent as one
BATCHING_FLAG = "cairn_batched_events"  # in workerinput: the controller unpacks batches
HELD_EVENTS = frozenset({"logstart", "testreport", "logfinish", "warning_recorded"})

Event = tuple[str, dict[str, Any]]


def group_of(nodeid: str) -> str | None:
    """The ``xdist_group`` xdist's worker appended to the node id (``...@name``), as xdist reads
    it: an ``@`` inside the parameters' brackets is not one."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    return None


def work_units(indices: Sequence[int], collection: Sequence[str]) -> list[list[int]]:
    """The tests in order as units a worker takes whole: each test without a group alone, each
    group's tests together, where its first test stands."""
    units: list[list[int]] = []
    groups: dict[str, list[int]] = {}
    for index in indices:
        group = group_of(collection[index])
        if group is None:
            units.append([index])
        elif group in groups:
            groups[group].append(index)
        else:
            groups[group] = [index]
            units.append(groups[group])
    return units


class GroupedChunkScheduling:
    """xdist's scheduler protocol (``xdist.scheduler.protocol.Scheduling``), the meaning of
    ``loadgroup``, and chunks of tests instead of one test at a time."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        self.config = config
        self.log = log.loadgroupsched if log is not None else (lambda *args: None)
        self.numnodes = len(parse_tx_spec_config(config))
        self.node2collection: dict[WorkerController, list[str]] = {}
        self.node2pending: dict[WorkerController, list[int]] = {}
        self.collection: list[str] | None = None
        self.queue: deque[list[int]] = deque()
        self.queued = 0  # tests in the queue

    @property
    def nodes(self) -> list[WorkerController]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return len(self.node2collection) >= self.numnodes

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or self.queue:
            return False
        return all(len(pending) < 2 for pending in self.node2pending.values())

    @property
    def has_pending(self) -> bool:
        return bool(self.queue) or any(self.node2pending.values())

    def add_node(self, node: WorkerController) -> None:
        assert node not in self.node2pending
        self.node2pending[node] = []

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        assert node in self.node2pending
        if self.collection_is_completed:  # a worker started later, after one died
            assert self.collection is not None
            if collection != self.collection:
                first = next(iter(self.node2collection))
                self.log(
                    report_collection_diff(
                        self.collection, collection, first.gateway.id, node.gateway.id
                    )
                )
                return
        self.node2collection[node] = list(collection)

    def mark_test_complete(
        self, node: WorkerController, item_index: int, duration: float = 0
    ) -> None:
        self.node2pending[node].remove(item_index)
        self._fill(node, duration)

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        self._requeue([self.collection.index(item)])
        for node in self.nodes:
            self._fill(node)

    def remove_pending_tests_from_node(
        self, node: WorkerController, indices: Sequence[int]
    ) -> None:
        raise NotImplementedError  # only work stealing asks for tests back

    def remove_node(self, node: WorkerController) -> str | None:
        """A worker ended; if it crashed, the test it was running is returned and the rest of
        what it had in hand goes back to the front of the queue (a group's tests still
        together)."""
        pending = self.node2pending.pop(node)
        if not pending:
            return None
        assert self.collection is not None
        crashed, *rest = pending
        self._requeue(rest)
        for other in self.nodes:
            self._fill(other)
        return self.collection[crashed]

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:  # a worker was added later
            for node in self.nodes:
                self._fill(node)
            return
        if not self._same_collections():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = next(iter(self.node2collection.values()))
        self._requeue(range(len(self.collection)))
        for node in self.nodes:
            self._send(node, self._chunk())
        if not self.queue:
            for node in self.nodes:
                node.shutdown()

    def _chunk(self) -> int:
        """How many tests a worker should hold: a share of what is left, at least two (a worker
        runs a test once it knows the next one, or that there is none)."""
        share = self.queued // max(len(self.node2pending) * CHUNKS_PER_WORKER, 1)
        return max(2, min(share, MAX_CHUNK))

    def _fill(self, node: WorkerController, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if not self.queue:
            node.shutdown()
            return
        pending = self.node2pending[node]
        wanted = self._chunk()
        if len(pending) >= max(2, wanted // 2):
            return
        if duration >= LONG_TEST_SECONDS and len(pending) >= 2:
            return  # busy with long tests: leave the rest to the others
        self._send(node, wanted - len(pending))

    def _send(self, node: WorkerController, count: int) -> None:
        """Hand the worker whole units from the front of the queue, ``count`` tests or more."""
        chosen: list[int] = []
        while self.queue and len(chosen) < count:
            chosen.extend(self.queue.popleft())
        if chosen:
            self.queued -= len(chosen)
            self.node2pending[node].extend(chosen)
            node.send_runtest_some(chosen)

    def _requeue(self, indices: Sequence[int]) -> None:
        assert self.collection is not None
        units = work_units(indices, self.collection)
        self.queue.extendleft(reversed(units))
        self.queued += len(indices)

    def _same_collections(self) -> bool:
        (first, collection), *others = self.node2collection.items()
        same = True
        for node, other in others:
            difference = report_collection_diff(
                collection, other, first.gateway.id, node.gateway.id
            )
            if difference:
                same = False
                self.log(difference)
                report = pytest.CollectReport(
                    nodeid=node.gateway.id, outcome="failed", longrepr=difference, result=[]
                )
                self.config.hook.pytest_collectreport(report=report)
        return same


@pytest.hookimpl
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> GroupedChunkScheduling | None:
    if config.getvalue("dist") == "loadgroup":
        return GroupedChunkScheduling(config, log)
    return None  # any other --dist: xdist's own


@pytest.hookimpl
def pytest_configure_node(node: WorkerController) -> None:
    """Controller: tell the worker to batch, and unpack its batches (with this scheduler only:
    work stealing sends from the worker's receiving thread)."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    node.workerinput[BATCHING_FLAG] = True
    node.process_from_remote = _unpacking(node.process_from_remote)  # type: ignore[method-assign]


def _unpacking(receive: Callable[[Any], None]) -> Callable[[Any], None]:
    def process_from_remote(eventcall: Any) -> None:
        if isinstance(eventcall, tuple) and eventcall[0] == BATCH_EVENT:
            for event in marshal.loads(eventcall[1]["events"]):  # noqa: S302 (our own worker)
                receive(event)
        else:
            receive(eventcall)

    return process_from_remote


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Worker: hold a test's messages and send them together."""
    workerinput = getattr(config, "workerinput", None)
    if not workerinput or not workerinput.get(BATCHING_FLAG):
        return
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, WorkerInteractor):
            plugin.sendevent = _EventBatcher(plugin.sendevent)  # type: ignore[method-assign]


class _EventBatcher:
    """A worker's ``sendevent``: a test's start, reports, warnings and end are held until the
    worker sends anything else (the test is done, a collection report, the worker's end), then
    all go in one message, in order."""

    def __init__(self, send: Callable[..., None]) -> None:
        self.send = send
        self.held: list[Event] = []

    def __call__(self, name: str, **kwargs: Any) -> None:
        if name in HELD_EVENTS:
            self.held.append((name, kwargs))
            return
        if not self.held:
            self.send(name, **kwargs)
            return
        events, self.held = [*self.held, (name, kwargs)], []
        try:
            packed = marshal.dumps(events)
        except ValueError:  # something only execnet can send: as xdist would
            for held_name, held_kwargs in events:
                self.send(held_name, **held_kwargs)
            return
        self.send(BATCH_EVENT, events=packed)
