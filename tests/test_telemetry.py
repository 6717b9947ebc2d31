"""Telemetry events: in-process subscribers, the JSON-lines file, and turning it off."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn import telemetry
from cairn.debug_log import bind_session, log_path

Received = list[tuple[str, dict[str, Any]]]


@pytest.fixture(autouse=True)
def default_telemetry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Each test starts (and leaves) telemetry enabled with no file; the debug log in tmp_path."""
    monkeypatch.delenv("CAIRN_TELEMETRY_FILE", raising=False)
    monkeypatch.delenv("CAIRN_DEBUG_LOG_FILE", raising=False)
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    telemetry.configure()
    yield
    monkeypatch.delenv("CAIRN_TELEMETRY_FILE", raising=False)
    telemetry.configure()


@pytest.fixture
def received() -> Iterator[Received]:
    events: Received = []
    unsubscribe = telemetry.subscribe(lambda name, attrs: events.append((name, attrs)))
    yield events
    unsubscribe()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_subscribers_receive_the_event_name_and_attributes(received: Received) -> None:
    telemetry.emit("memory.recall.delivery", phase="fast", count=2)

    assert received == [("memory.recall.delivery", {"phase": "fast", "count": 2})]


def test_an_unsubscribed_subscriber_hears_nothing_more() -> None:
    heard: list[str] = []
    unsubscribe = telemetry.subscribe(lambda name, attrs: heard.append(name))
    telemetry.emit("first")

    unsubscribe()
    unsubscribe()  # a second call is harmless
    telemetry.emit("second")

    assert heard == ["first"]


def test_a_raising_subscriber_does_not_stop_the_others() -> None:
    heard: list[str] = []

    def broken(name: str, attrs: dict[str, Any]) -> None:
        raise RuntimeError("subscriber bug")

    remove_broken = telemetry.subscribe(broken)  # registered first: the others come after it
    remove_good = telemetry.subscribe(lambda name, attrs: heard.append(name))
    try:
        telemetry.emit("memory.extract", status="ok")  # does not raise
        telemetry.emit("memory.dream")
    finally:
        remove_broken()
        remove_good()

    assert heard == ["memory.extract", "memory.dream"]


def test_each_subscriber_gets_its_own_copy_of_the_attributes(received: Received) -> None:
    def meddler(name: str, attrs: dict[str, Any]) -> None:
        attrs["count"] = -1

    unsubscribe = telemetry.subscribe(meddler)
    try:
        telemetry.emit("memory.recall", count=3)
    finally:
        unsubscribe()

    assert received == [("memory.recall", {"count": 3})]


def test_cairn_telemetry_file_appends_one_json_line_per_event(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    outfile = tmp_path / "events.jsonl"
    outfile.write_text('{"event": "earlier"}\n')
    monkeypatch.setenv("CAIRN_TELEMETRY_FILE", str(outfile))

    telemetry.emit("memory.extract", status="ok", written=1)
    telemetry.emit("memory.dream", status="skipped")

    lines = _lines(outfile)
    assert [line["event"] for line in lines] == ["earlier", "memory.extract", "memory.dream"]
    assert lines[1]["status"] == "ok" and lines[1]["written"] == 1
    assert isinstance(lines[1]["time"], float)


def test_configure_outfile_appends_json_lines(tmp_path: Path) -> None:
    outfile = tmp_path / "telemetry.jsonl"
    telemetry.configure(outfile=str(outfile))

    telemetry.emit("memory.forget", removed=2, path=Path("/x/y.md"))

    [line] = _lines(outfile)
    assert line["event"] == "memory.forget"
    assert line["removed"] == 2
    assert line["path"] == "/x/y.md"  # values JSON cannot hold are written as text


def test_an_unwritable_outfile_never_raises(tmp_path: Path, received: Received) -> None:
    telemetry.configure(outfile=str(tmp_path / "missing-folder" / "events.jsonl"))

    telemetry.emit("memory.extract")

    assert [name for name, _ in received] == ["memory.extract"]
    assert not (tmp_path / "missing-folder").exists()


def test_enabled_telemetry_goes_to_the_debug_log(received: Received) -> None:
    session = str(uuid.uuid4())

    with bind_session(session):
        telemetry.emit("memory.recall", count=1)

    log = log_path(session).read_text(encoding="utf-8")
    assert "[TELEMETRY]" in log
    assert '"event": "memory.recall"' in log


def test_disabled_telemetry_notifies_subscribers_but_writes_nothing(
    tmp_path: Path, received: Received
) -> None:
    outfile = tmp_path / "events.jsonl"
    telemetry.configure(enabled=False, outfile=str(outfile))
    session = str(uuid.uuid4())

    with bind_session(session):
        telemetry.emit("memory.extract", status="ok")

    assert received == [("memory.extract", {"status": "ok"})]
    assert not outfile.exists()
    assert not log_path(session).exists()
