"""The debug log: one line per message, one file per session, ``debug/latest``, and off."""

from __future__ import annotations

import asyncio
import datetime as _dt
import io
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.config.paths import debug_dir
from cairn.debug_log import (
    MAX_PENDING_LINES,
    bind_session,
    get_logger,
    log_path,
    mirror_warnings,
    set_process_session,
)

LINE = re.compile(r"^(?P<time>\S+) \[(?P<level>[A-Z]+)\] \[(?P<tag>[A-Z_]+)\] (?P<message>.*)$")


@pytest.fixture(autouse=True)
def debug_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A fresh ``$CAIRN_HOME`` with the debug log on and no process session."""
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))
    monkeypatch.delenv("CAIRN_DEBUG_LOG_FILE", raising=False)
    set_process_session(None)
    yield tmp_path / "cairn-home" / "debug"
    set_process_session(None)
    mirror_warnings(None)


def _session() -> str:
    return str(uuid.uuid4())  # new per test: the logger keeps one open handle per session


def _lines(session: str) -> list[str]:
    return log_path(session).read_text(encoding="utf-8").splitlines()


def test_log_files_live_in_the_debug_folder_of_cairn_home(debug_home: Path) -> None:
    assert log_path("abc") == debug_home / "abc.txt"
    assert debug_dir() == debug_home


def test_each_line_has_time_level_tag_and_message() -> None:
    session = _session()
    log = get_logger("MEMORY_RECALL")

    with bind_session(session):
        log.debug("one")
        log.info("two")
        log.warning("three")
        log.error("four")

    parsed = [LINE.match(line) for line in _lines(session)]
    assert all(parsed), _lines(session)
    assert [(m["level"], m["tag"], m["message"]) for m in parsed if m] == [
        ("DEBUG", "MEMORY_RECALL", "one"),
        ("INFO", "MEMORY_RECALL", "two"),
        ("WARN", "MEMORY_RECALL", "three"),
        ("ERROR", "MEMORY_RECALL", "four"),
    ]
    stamp = _dt.datetime.fromisoformat(parsed[0]["time"])  # type: ignore[index]
    assert stamp.utcoffset() == _dt.timedelta(0)  # ISO time in UTC


def test_newlines_in_a_message_are_escaped_onto_one_line() -> None:
    session = _session()

    with bind_session(session):
        get_logger("HOOKS").warning("hook failed:\nline two\nline three")

    [line] = _lines(session)
    assert line.endswith("[HOOKS] hook failed:\\nline two\\nline three")


def test_carriage_returns_in_a_message_are_escaped_too() -> None:
    """Regression: a CRLF in a message (a Windows tool's output) split the entry in two."""
    session = _session()

    with bind_session(session):
        get_logger("TOOLS").info("out:\r\nnext\rover")

    [line] = _lines(session)
    assert line.endswith("[TOOLS] out:\\r\\nnext\\rover")


def test_the_process_session_gets_the_lines_when_none_is_bound() -> None:
    session = _session()
    set_process_session(session)

    get_logger("SESSION").info("from the process")

    [line] = _lines(session)
    assert line.endswith("[SESSION] from the process")


def test_latest_points_at_the_process_sessions_file(debug_home: Path) -> None:
    first, second = _session(), _session()

    set_process_session(first)
    set_process_session(second)
    get_logger("SESSION").info("hello")

    latest = debug_home / "latest"
    assert latest.is_symlink()
    assert latest.resolve() == log_path(second).resolve()
    assert latest.read_text(encoding="utf-8").endswith("[SESSION] hello\n")


def test_a_bound_session_wins_over_the_process_session() -> None:
    process, bound = _session(), _session()
    set_process_session(process)

    with bind_session(bound):
        get_logger("DAEMON").info("for the bound one")
    get_logger("DAEMON").info("for the process one")

    assert [line.split("] ", 2)[2] for line in _lines(bound)] == ["for the bound one"]
    assert [line.split("] ", 2)[2] for line in _lines(process)] == ["for the process one"]


def test_without_any_session_nothing_is_written(debug_home: Path) -> None:
    get_logger("CLI").info("nobody listens")

    assert not debug_home.exists()


@pytest.mark.parametrize("value", ["0", "false", "off", "no", " OFF ", "False"])
def test_cairn_debug_log_file_off_values_disable_writing(
    monkeypatch: pytest.MonkeyPatch, debug_home: Path, value: str
) -> None:
    monkeypatch.setenv("CAIRN_DEBUG_LOG_FILE", value)
    session = _session()

    set_process_session(session)
    with bind_session(session):
        get_logger("SESSION").error("not written")

    assert not debug_home.exists()


@pytest.mark.parametrize("value", ["1", "true", ""])
def test_other_cairn_debug_log_file_values_keep_writing(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CAIRN_DEBUG_LOG_FILE", value)
    session = _session()

    with bind_session(session):
        get_logger("SESSION").info("written")

    assert len(_lines(session)) == 1


async def test_concurrent_sessions_each_log_to_their_own_file() -> None:
    first, second = _session(), _session()
    both_started = asyncio.Barrier(2)

    async def work(session: str, name: str) -> None:
        with bind_session(session):
            log = get_logger("DAEMON")
            await both_started.wait()
            for i in range(5):
                log.info(f"{name} {i}")
                await asyncio.sleep(0)  # let the other session log in between

    await asyncio.gather(work(first, "alpha"), work(second, "beta"))

    assert [line.split("] ", 2)[2] for line in _lines(first)] == [f"alpha {i}" for i in range(5)]
    assert [line.split("] ", 2)[2] for line in _lines(second)] == [f"beta {i}" for i in range(5)]


async def test_a_task_created_inside_a_bound_block_logs_to_that_session() -> None:
    session = _session()

    async def background() -> None:
        await asyncio.sleep(0)
        get_logger("MEMORY").info("from the background task")

    with bind_session(session):
        task = asyncio.ensure_future(background())
    await task

    [line] = _lines(session)
    assert line.endswith("[MEMORY] from the background task")


# ----- before there is a session -----


def test_lines_logged_before_the_process_has_a_session_reach_its_log_first() -> None:
    """Regression (#17): warnings logged while a front end started, before any session existed
    (a settings or recording problem), were dropped."""
    log = get_logger("SESSION")
    log.warning("recording line 3 is truncated")
    session = _session()

    set_process_session(session)
    log.info("the session runs")

    assert [line.split("] ", 2)[2] for line in _lines(session)] == [
        "recording line 3 is truncated",
        "the session runs",
    ]


def test_early_lines_go_to_the_first_session_only() -> None:
    get_logger("SESSION").info("early")
    first, second = _session(), _session()

    set_process_session(first)
    set_process_session(second)
    get_logger("SESSION").info("later")

    assert [line.split("] ", 2)[2] for line in _lines(first)] == ["early"]
    assert [line.split("] ", 2)[2] for line in _lines(second)] == ["later"]


def test_only_the_newest_early_lines_are_kept() -> None:
    log = get_logger("SESSION")
    for index in range(MAX_PENDING_LINES + 5):
        log.info(f"line {index}")
    session = _session()

    set_process_session(session)

    lines = _lines(session)
    assert len(lines) == MAX_PENDING_LINES
    assert lines[0].endswith("line 5")
    assert lines[-1].endswith(f"line {MAX_PENDING_LINES + 4}")


def test_with_the_log_off_early_lines_are_not_kept(
    monkeypatch: pytest.MonkeyPatch, debug_home: Path
) -> None:
    monkeypatch.setenv("CAIRN_DEBUG_LOG_FILE", "0")
    get_logger("SESSION").warning("not kept")
    monkeypatch.delenv("CAIRN_DEBUG_LOG_FILE")
    session = _session()

    set_process_session(session)

    assert not log_path(session).exists()


# ----- warnings mirrored to a stream (cairn --acp and cairn serve: stderr) -----


def test_mirrored_warnings_and_errors_are_one_prefixed_line_each() -> None:
    stream = io.StringIO()
    mirror_warnings(stream, "cairn --acp: ")
    log = get_logger("MEMORY")

    log.info("not a warning")
    log.warning("index not saved\nTraceback (most recent call last): ...")
    log.error("extraction failed")

    assert stream.getvalue().splitlines() == [
        "cairn --acp: warning: [MEMORY] index not saved",
        "cairn --acp: error: [MEMORY] extraction failed",
    ]


def test_a_warning_can_stay_off_the_mirror_and_the_mirror_can_stop() -> None:
    stream = io.StringIO()
    mirror_warnings(stream, "x: ")
    log = get_logger("ACP")

    log.warning("shown already by another handler", mirror=False)
    mirror_warnings(None)
    log.warning("after the mirror stopped")

    assert stream.getvalue() == ""


def test_a_closed_mirror_stream_never_breaks_the_caller() -> None:
    stream = io.StringIO()
    mirror_warnings(stream, "x: ")
    stream.close()

    get_logger("ACP").warning("still fine")  # does not raise

