"""`python -m cairn.testing.server`: the scripted server as its own process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

COMMAND = [sys.executable, "-m", "cairn.testing.server"]


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    replies = [
        {"text": "recap answer", "purpose": "recap"},
        {"tool_calls": [{"name": "glob", "args": {"pattern": "*"}}]},
    ]
    path.write_text(json.dumps({"replies": replies, "default": {"text": "fallback"}}))
    return path


@pytest.fixture
def served(script: Path, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    record = tmp_path / "requests.jsonl"
    with subprocess.Popen(
        [*COMMAND, "--port", "0", "--script", str(script), "--record", str(record)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        yield process, base_url
        if process.poll() is None:
            process.kill()


def ask(base_url: str, purpose: str) -> dict[str, object]:
    response = httpx.post(
        base_url + "/chat/completions",
        json={"model": "any", "messages": [{"role": "user", "content": "hi"}], "stream": False},
        headers={"X-Cairn-Purpose": purpose},
        trust_env=False,
    )
    return response.json()["choices"][0]


def test_it_prints_the_base_url_and_answers_from_the_script(
    served: tuple[subprocess.Popen[str], str],
) -> None:
    _, base_url = served
    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")

    main = ask(base_url, "main")
    recap = ask(base_url, "recap")
    later = ask(base_url, "main")

    assert main["finish_reason"] == "tool_calls"
    assert recap["message"] == {"role": "assistant", "content": "recap answer"}
    assert later["message"] == {"role": "assistant", "content": "fallback"}


def test_it_records_requests_and_exits_cleanly_on_sigterm(
    served: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    process, base_url = served
    ask(base_url, "extract")

    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=10)

    assert process.returncode == 0
    assert stderr == ""
    [line] = (tmp_path / "requests.jsonl").read_text().splitlines()
    logged = json.loads(line)
    assert (logged["index"], logged["purpose"]) == (0, "extract")


def test_a_bad_script_is_reported_with_exit_code_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"txt": "typo"}]))

    finished = subprocess.run(
        [*COMMAND, "--script", str(bad)], capture_output=True, text=True, timeout=30
    )

    assert finished.returncode == 2
    assert "unknown reply field" in finished.stderr
