"""Shared memory on a real PostgreSQL, with real cairn processes (#15's "Done when").

A "machine" is a cairn home of its own (its own mirror of the database): processes on two
machines share a memory only through the database. Tenants of one daemon never share one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from cairn.config.settings import Settings
from cairn.memory.manager import MemoryManager
from cairn.memory.store.locks import hold_roots
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.postgres.backend import mirror_folder
from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call

from .. import polling
from ..memory.memory_helpers import fill_memories, scan_workers, unstamped
from ..memory.postgres_helpers import SilentDatabase, postgres_dsn, postgres_server
from ..memory.store.test_backend_contract import write
from .conftest import CAIRN, extract_workers, wait_for_extract_workers, write_settings
from .memory_worker import SHARED_LOG, audit, shared_log_text
from .test_daemon import Served, launch, reap

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

NAMESPACE = "team"
TOKEN = "tenant-token"
HEADER = "X-Cairn-Tenant"
PREFERENCE = "By the way: I always use pytest for tests, never unittest."
QUESTION = "Should the new tests use pytest or unittest?"
MARKER = "MARKER-PYTEST-5150"  # only in the memory's body: in a request only when recalled
MEMORY = f"""---
name: Tests use pytest
description: The user writes tests with pytest, never unittest
type: feedback
---

Write tests with pytest: plain asserts, no unittest.TestCase. {MARKER}
"""
WAIT_SECONDS = 60.0  # a hang guard for the other machine's catch-up, not a speed claim
_ROOT_LINE = re.compile(r"^- project memory: (.+)/$", re.MULTILINE)


class Machines:
    """``env(name)``: the environment of a cairn process on machine ``name``."""

    def __init__(self, tmp_path: Path, base: dict[str, str], dsn: str, project: Path) -> None:
        self.tmp_path, self.base, self.dsn, self.project = tmp_path, base, dsn, project

    def home(self, name: str) -> Path:
        return self.tmp_path / f"machine-{name}"

    def env(self, name: str) -> dict[str, str]:
        """Each machine's user trusts the project (its memory namespace needs trust)."""
        settings = self.home(name) / "settings.json"
        if not settings.exists():
            settings.parent.mkdir(parents=True, exist_ok=True)
            trusted = {"security": {"trustedFolders": [str(self.project)]}}
            settings.write_text(json.dumps(trusted))
        return {**self.base, "CAIRN_HOME": str(self.home(name)), "CAIRN_MEMORY_DSN": self.dsn}

    def mirror(self, name: str, namespace: str = NAMESPACE) -> Path:
        """Where machine ``name`` mirrors the project memory of ``namespace``."""
        return mirror_folder(self.home(name), self.dsn, namespace) / "memory"

    def reader(self, name: str, *, tenant: str | None = None) -> MemoryManager:
        """A memory manager on machine ``name`` (the test's own view of the database)."""
        return MemoryManager(
            self.project, settings=_settings(), environ=self.env(name), tenant=tenant
        )

    def cairn(self, name: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CAIRN, *args], cwd=self.project, env=self.env(name),
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip


def _settings() -> Settings:
    return Settings.model_validate(
        {"memory": {"backend": "postgres", "postgres": {"namespace": NAMESPACE}}}
    )


@pytest.fixture
def machines(
    tmp_path: Path, cairn_env: dict[str, str], postgres_dsn: str, project: Path
) -> Machines:
    write_settings(project, {"memory": {
        "backend": "postgres", "enableManagedAutoDream": False,
        "postgres": {"namespace": NAMESPACE, "pollSeconds": 1},
    }})  # fmt: skip
    return Machines(tmp_path, cairn_env, postgres_dsn, project)


def model(request: RecordedRequest) -> Reply | None:
    """Extract saves the preference (when the conversation states it) into the memory folder
    its prompt names; Recall's selector adds nothing (the fast phase is what recalls)."""
    if request.purpose == "extract":
        if request.messages[-1].get("role") == "tool" or not request.contains(PREFERENCE):
            return reply("Saved.")
        found = _ROOT_LINE.search(request.system or "")
        assert found is not None, request.system
        target = Path(found.group(1)) / "feedback" / "testing-with-pytest.md"
        return tool_call("write_file", {"file_path": str(target), "content": MEMORY})
    if request.purpose == "recall-selector":
        return reply(json.dumps({"selected_memories": []}))
    return None


def eventually(check: Callable[[], bool]) -> None:
    if not polling.eventually(check, WAIT_SECONDS):
        raise TimeoutError("the condition never held")


@pytest.fixture
def serve(machines: Machines) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(machine: str, *args: str, environ: dict[str, str] | None = None) -> Served:
        env = {**machines.env(machine), **(environ or {})}
        served = launch(args, cwd=machines.project, env=env)
        started.append(served)
        return served

    yield start
    reap(started)


def main_requests(server: ScriptedServer, session_id: str) -> list[RecordedRequest]:
    return [r for r in server.requests_for("main") if r.session_id == session_id]


async def test_a_memory_extracted_on_one_machine_is_recalled_on_the_next_turn_of_a_process_on_another(  # noqa: E501
    machines: Machines, serve: Callable[..., Served], scripted_server: ScriptedServer
) -> None:
    scripted_server.handler = model  # type: ignore[assignment]
    scripted_server.default = reply("Noted.")
    served = serve("b")  # a long-running process on machine B, already warm
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt_and_wait("hello")

        learned = machines.cairn("a", "-p", PREFERENCE)  # machine A learns

        assert learned.returncode == 0, learned.stderr
        wait_for_extract_workers(machines.project)  # -p hands its extraction to a worker
        assert (
            unstamped((machines.mirror("a") / "feedback/testing-with-pytest.md").read_text())
            == MEMORY
        )
        eventually((machines.mirror("b") / "feedback/testing-with-pytest.md").exists)
        await session.prompt_and_wait(QUESTION)

    first, second = main_requests(scripted_server, session.session_id)
    assert not first.contains(MARKER)
    assert second.contains(MARKER)  # recalled on B's next fresh turn
    assert served.stop() == 0


def test_eight_writers_on_eight_machines_lose_nothing(machines: Machines) -> None:
    reader = machines.reader("reader")
    write(reader, SHARED_LOG, shared_log_text())
    workers, rounds = 8, 5
    worker = Path(__file__).with_name("memory_worker.py")

    children = [
        subprocess.Popen([sys.executable, str(worker), str(machines.project), str(w), str(rounds),
                          "postgres"], env=machines.env(f"w{w}"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for w in range(workers)
    ]  # fmt: skip
    results = [json.loads(child.communicate(timeout=170)[0]) for child in children]

    assert [r["completed"] for r in results] == [rounds] * workers, results
    reader.refresh()
    root = reader.roots.project
    assert root is not None
    assert audit(root, workers, rounds) == {
        "lost_files": 0, "corrupt_files": 0, "lost_log_lines": 0, "duplicate_log_lines": 0,
        "missing_index_lines": 0, "temp_files": 0,
    }  # fmt: skip
    trail = [json.loads(line)["op"] for line in (root / ".history.jsonl").read_text().splitlines()]
    assert trail.count("extract") == workers * rounds
    reader.close()


def test_a_kill_mid_write_leaves_the_database_as_it_was_and_no_held_lock(
    machines: Machines, scripted_server: ScriptedServer
) -> None:
    scripted_server.handler = model  # type: ignore[assignment]
    scripted_server.default = reply("Noted.")
    paused = {**machines.env("a"), "CAIRN_TEST_MEMORY_WRITE_PAUSE": "60"}
    # Its extract worker writes the memory, maybe before `cairn -p` has exited: on a fresh
    # machine its memory warm-up pulls the mirror (under the root lock) only after the turn's
    # first search, about when the turn ends, and when that comes after the worker's paused
    # write it waits for the write's lock (60 s here, milliseconds outside this test) until the
    # kill below. So `cairn -p` is waited for after the kill, not before.
    with subprocess.Popen(
        [*CAIRN, "-p", PREFERENCE],
        cwd=machines.project,
        env=paused,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as first:
        try:
            try:
                eventually(lambda: bool(list(machines.mirror("a").glob("feedback/.*.tmp"))))
            finally:  # the worker, inside the write transaction, holding its lock
                for worker in extract_workers(machines.project):
                    os.kill(worker, signal.SIGKILL)
            errors = first.communicate(timeout=60)[1]
        finally:
            first.kill()  # (nothing once it has exited)
    assert first.returncode == 0, errors
    wait_for_extract_workers(machines.project)
    reader = machines.reader("reader")
    assert reader.docs() == []  # nothing of the half-done write reached the database

    done = machines.cairn("b", "-p", PREFERENCE)  # would wait for a held lock, then fail

    assert done.returncode == 0, done.stderr
    wait_for_extract_workers(machines.project)
    # The reader's mirror catches up through its change feed, a thread of its own.
    eventually(lambda: [doc.title for doc in reader.docs()] == ["Tests use pytest"])
    assert unstamped(reader.docs()[0].path.read_text()) == MEMORY
    reader.close()


def test_a_kill_mid_dream_leaves_no_held_lock(
    machines: Machines, scripted_server: ScriptedServer
) -> None:
    reader = machines.reader("reader")
    write(reader, "feedback/pytest.md", MEMORY)  # something to consolidate: else Dream skips
    slow = reply("Nothing to do.", delay=60)
    scripted_server.handler = lambda r: slow if r.purpose == "dream" else None
    child = subprocess.Popen([*CAIRN, "memory", "dream"], cwd=machines.project,
                             env=machines.env("a"), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    lock = reader.backend.dream_lock()
    try:
        scripted_server.wait_for_requests(1, purpose="dream", timeout=60)
        assert lock.holder(time.time(), clean=False) is not None  # machine A dreams
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        child.kill()
    eventually(lambda: lock.holder(time.time(), clean=False) is None)  # the server let go

    scripted_server.handler = lambda r: reply("Nothing to do.") if r.purpose == "dream" else None
    done = machines.cairn("b", "memory", "dream")

    assert done.returncode == 0, done.stderr
    assert "Dream finished: no changes" in done.stdout
    reader.close()


def test_tenants_of_one_daemon_never_see_each_others_memory_and_it_survives_a_restart(
    machines: Machines, serve: Callable[..., Served], scripted_server: ScriptedServer
) -> None:
    scripted_server.handler = model  # type: ignore[assignment]
    scripted_server.default = reply("Noted.")
    served = serve("s1", "--token", TOKEN, "--tenant-header", HEADER)

    def client(tenant: str) -> DaemonClient:
        return DaemonClient(served.url, TOKEN, headers={HEADER: tenant})

    async def learn_and_ask() -> tuple[str, str]:
        async with client("acme") as acme, client("globex") as globex:
            taught = await DaemonSessionClient.create(acme)
            await taught.prompt_and_wait(PREFERENCE)
            eventually(lambda: "Tests use pytest" in tenant_list("acme"))
            asked = await DaemonSessionClient.create(globex)
            for text in (QUESTION, "and the fixtures?", "fine"):
                await asked.prompt_and_wait(text)
            recap = reply("<recap>Choosing a test runner.</recap>")
            scripted_server.enqueue(recap, purpose="recap")
            assert await asked.recap() == "Choosing a test runner."
            return taught.session_id, asked.session_id

    def tenant_list(tenant: str) -> str:
        listed = machines.cairn("s1", "memory", "--tenant", tenant, "list")
        assert listed.returncode == 0, listed.stderr
        return listed.stdout

    acme_session, globex_session = asyncio.run(learn_and_ask())

    assert "Tests use pytest" not in tenant_list("globex")  # `cairn memory`
    globex_requests = [r for r in scripted_server.requests if r.session_id == globex_session]
    assert {r.purpose for r in globex_requests} >= {"main", "recap"}
    assert not any(r.contains(MARKER) or r.contains("testing-with-pytest") for r in globex_requests)
    forged = httpx.post(f"{served.url}/session", json={}, headers={HEADER: "acme"})
    assert forged.status_code == 401  # a tenant header without the token is refused
    assert served.stop() == 0

    # A new container. What its first turn carries is checked here; its 100 ms bound is measured
    # by benchmarks/memory_postgres_bench.py (a fresh machine's first turn): on a loaded machine
    # the database search can miss it (seen twice at load 16-20).
    patient = {"CAIRN_TEST_RECALL_WAIT_MS": str(WAIT_SECONDS * 1000)}
    restarted = serve("s2", "--token", TOKEN, "--tenant-header", HEADER, environ=patient)

    async def ask_again() -> str:
        async with DaemonClient(restarted.url, TOKEN, headers={HEADER: "acme"}) as acme:
            session = await DaemonSessionClient.create(acme)
            wait_until_search_ready(machines.dsn)  # while the user types
            await session.prompt_and_wait(QUESTION)
            return session.session_id

    fresh = asyncio.run(ask_again())

    [first_turn] = main_requests(scripted_server, fresh)
    assert first_turn.contains(MARKER)  # write → restart → recalled on the first turn
    assert acme_session not in (globex_session, fresh)


def test_serve_refuses_a_tenant_header_without_a_token(machines: Machines) -> None:
    result = machines.cairn("s", "serve", "--port", "0", "--tenant-header", HEADER, timeout=60)
    assert result.returncode == 42
    assert "--tenant-header needs a token" in result.stderr


FORGOTTEN_MARKER = "MARKER-UNITTEST-0451"  # in a forgotten memory the question also matches
FORGOTTEN = f"""---
name: Tests use unittest
description: The user writes tests with unittest
type: feedback
---

Write tests with unittest.TestCase, never pytest. {FORGOTTEN_MARKER}
"""


def wait_until_search_ready(dsn: str) -> None:
    """Until a machine's database search is ready: its connection open and idle (tokenizer
    loaded). Asked on one connection of the test's (a new connection a poll was a new server
    process for each of hundreds of polls)."""
    import psycopg

    from cairn.memory.store.postgres.backend import SEARCH_APPLICATION_NAME

    with psycopg.connect(dsn, autocommit=True) as connection:

        def ready() -> bool:  # each statement its own transaction: a fresh view of the activity
            row = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = %s AND state = 'idle'",
                (SEARCH_APPLICATION_NAME,),
            ).fetchone()
            return row is not None and row[0] > 0

        eventually(ready)


async def test_a_fresh_machine_recalls_from_the_database_in_its_first_request_while_its_index_warms(
    machines: Machines, serve: Callable[..., Served], scripted_server: ScriptedServer
) -> None:
    """A new container (an empty mirror) with memories in the database: its first request
    carries the memory the question matches, though the machine's own index is not ready (its
    warm-up is held up here: this test holds its mirror's lock), and never a forgotten one."""
    from cairn.memory.forget.selection import ForgetPlan, list_forget_candidates
    from cairn.memory.store.locks import hold_local_roots

    scripted_server.handler = model  # type: ignore[assignment]
    scripted_server.default = reply("Noted.")
    writer = machines.reader("a")
    write(writer, "feedback/testing-with-pytest.md", MEMORY)
    write(writer, "feedback/testing-with-unittest.md", FORGOTTEN)
    forgotten = [c for c in list_forget_candidates(writer.docs()) if "unittest" in c.title]
    assert writer.apply_forget(ForgetPlan("unittest", forgotten, "heuristic")).ok
    writer.close()

    with hold_local_roots([machines.mirror("b")]):  # machine B's pull waits: its index too
        served = serve("b")
        async with DaemonClient(served.url) as client:
            session = await DaemonSessionClient.create(client)  # its warm-up starts
            wait_until_search_ready(machines.dsn)  # what a user's typing leaves time for
            await session.prompt_and_wait(QUESTION)
        assert not (machines.mirror("b") / "feedback").exists()  # nothing pulled yet

    [first] = main_requests(scripted_server, session.session_id)
    assert first.contains(MARKER)
    assert not first.contains(FORGOTTEN_MARKER)
    # the warm-up went on after the lock: the mirror fills, with what was not forgotten
    eventually(lambda: (machines.mirror("b") / "feedback/testing-with-pytest.md").exists())
    assert not (machines.mirror("b") / "feedback/testing-with-unittest.md").exists()
    assert served.stop() == 0


def test_a_fresh_machine_asked_at_once_answers_and_warms_up_after(
    machines: Machines, scripted_server: ScriptedServer
) -> None:
    """``cairn -p`` on a new container: the prompt comes as the session starts (its memory
    only if the database answered within Recall's bound), the turn runs, the warm-up ends."""
    scripted_server.default = reply("Noted.")
    writer = machines.reader("a")
    write(writer, "feedback/testing-with-pytest.md", MEMORY)
    writer.close()

    done = machines.cairn("b", "-p", QUESTION)

    assert done.returncode == 0, done.stderr
    assert "Noted." in done.stdout
    assert (machines.mirror("b") / "feedback/testing-with-pytest.md").exists()


def test_a_fresh_machine_exits_after_its_answer_though_its_mirror_is_locked(
    machines: Machines, scripted_server: ScriptedServer
) -> None:
    """Regression: ``cairn -p`` on a fresh machine waited at exit for its memory warm-up, whose
    pull waited for the mirror's lock (up to ``LOCK_WAIT_SECONDS``) while another writer held it
    (the test here; the extract worker the process had just started, in the field), then up to
    5 s more for its change feed's pull. Now the process exits with its answer while the lock
    is still held; nothing is pulled or indexed half-way, and the next process pulls it all."""
    from cairn.memory.store.locks import LOCK_WAIT_SECONDS, hold_local_roots

    scripted_server.default = reply("Noted.")
    writer = machines.reader("a")
    write(writer, "feedback/testing-with-pytest.md", MEMORY)
    writer.close()

    mirror = machines.mirror("b")
    with hold_local_roots([mirror]):  # the warm-up's pull waits for it from its start
        started = time.monotonic()  # the pull's wait begins later: it would end after this
        child = subprocess.Popen([*CAIRN, "-p", QUESTION], cwd=machines.project,
                                 env=machines.env("b"), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)  # fmt: skip
        left = LOCK_WAIT_SECONDS - (time.monotonic() - started)
        exited = polling.eventually(lambda: child.poll() is not None, left)
        pulled = (mirror / "feedback").exists()
    out, err = child.communicate(timeout=120)
    wait_for_extract_workers(machines.project)  # its worker waited for the lock too

    assert exited, "cairn -p waited at exit for its warm-up's lock"
    assert child.returncode == 0, err
    assert "Noted." in out
    [first] = scripted_server.requests_for("main")
    assert first.contains(MARKER)  # the database answered: the warm-up went on to its pull
    assert not pulled  # which never began
    done = machines.cairn("b", "-p", QUESTION)  # the next process on the machine
    assert done.returncode == 0, done.stderr
    assert (mirror / "feedback/testing-with-pytest.md").exists()
    assert all(request.contains(MARKER) for request in scripted_server.requests_for("main"))


MANY = 10_000  # memories whose first scan takes seconds (worker processes: 2,000 and more)


def test_a_fresh_machine_exits_with_its_answer_while_it_still_indexes_its_memory(
    machines: Machines, scripted_server: ScriptedServer
) -> None:
    """Regression: ``cairn -p`` on a fresh machine waited at exit for the first scan of the
    memory its warm-up had just pulled (seconds at 10,000 memories, after the answer). Here
    the scan's worker processes are paused while it runs, so it cannot end: the process now
    exits with its answer all the same, stops those workers, and saves no index (none is ever
    saved half-built). The next process that lives long enough builds it, whole."""
    # Extract skipped (memory pressure): its worker would index the mirror too
    write_settings(machines.project, {"memory": {
        "backend": "postgres", "enableManagedAutoDream": False, "minAvailableMemoryMb": 10**9,
        "postgres": {"namespace": NAMESPACE, "pollSeconds": 1},
    }})  # fmt: skip
    writer = machines.reader("a")
    root = writer.roots.project
    assert root is not None
    with hold_roots(list(writer.root_map().values())):  # one section: one commit
        fill_memories(root, MANY)
        writer.store.rebuild_index_files()
    writer.close()
    answered = threading.Event()
    scripted_server.default = reply("Noted.", hold=answered)
    home = machines.home("b")

    child = subprocess.Popen([*CAIRN, "-p", QUESTION], cwd=machines.project,
                             env=machines.env("b"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    paused: list[int] = []
    try:
        assert polling.eventually(lambda: bool(scan_workers(child.pid)), WAIT_SECONDS)
        for pid in scan_workers(child.pid):
            os.kill(pid, signal.SIGSTOP)  # the scan under way cannot end while they sleep
            paused.append(pid)
        answered.set()
        exited = polling.eventually(lambda: child.poll() is not None, WAIT_SECONDS)
    finally:
        answered.set()
        for pid in paused:  # (before the fix: so that the process can end)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    out, err = child.communicate(timeout=120)
    wait_for_extract_workers(machines.project)

    assert exited, "cairn -p waited at exit for the first scan of its memory"
    assert child.returncode == 0, err
    assert "Noted." in out
    assert not any(Path(f"/proc/{pid}").exists() for pid in paused)  # none left behind
    assert not list(home.rglob("recall-index/*.bin"))  # nothing half-built saved
    assert not list(home.rglob("recall-index/.*.tmp"))  # nor left being written

    indexed = threading.Event()  # the next process answers once its index is built
    scripted_server.default = reply("Noted.", hold=indexed)
    later = subprocess.Popen([*CAIRN, "-p", QUESTION], cwd=machines.project,
                             env=machines.env("b"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        built = polling.eventually(lambda: bool(list(home.rglob("recall-index/project.bin"))),
                                   WAIT_SECONDS)  # fmt: skip
    finally:
        indexed.set()
    _, err = later.communicate(timeout=120)
    assert built and later.returncode == 0, err
    reader = machines.reader("b")
    try:
        report = MemoryStore(reader.roots).refresh()  # the saved index, as the next one loads it
    finally:
        reader.close()
    assert (report.docs, report.reparsed) == (MANY, 0)


def test_a_database_that_never_answers_delays_no_turn_of_a_fresh_machine(
    machines: Machines, scripted_server: ScriptedServer
) -> None:
    """The warm-up's pull and Recall's search both hang on it: the first request leaves while
    the first connection to it is still waiting (before, the turn waited for the warm-up)."""
    scripted_server.default = reply("Noted.")
    silent = SilentDatabase()
    env = {**machines.env("b"), "CAIRN_MEMORY_DSN": f"postgresql://cairn@127.0.0.1:{silent.port}/m"}
    try:
        child = subprocess.Popen([*CAIRN, "-p", QUESTION], cwd=machines.project, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)  # fmt: skip
        scripted_server.wait_for_requests(1, purpose="main", timeout=60)
        sent = time.monotonic()
        out, err = child.communicate(timeout=120)
        eventually(lambda: bool(silent.closed))  # (at its exit at the latest)
    finally:
        silent.close()

    assert child.returncode == 0, err
    assert "Noted." in out
    assert silent.accepted  # the process did try the database
    assert min(silent.closed) > sent  # and was still waiting for it then
