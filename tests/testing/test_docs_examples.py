"""The examples in docs/testing.md run as written and use cairn's real names."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.testing.script import load_script

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
RUNNABLE = re.compile(r"<!-- docs-test: run -->\n```python\n(.*?)```", re.DOTALL)
JSON_BLOCK = re.compile(r"```json\n(.*?)```", re.DOTALL)


def _path_with_cairn() -> str:
    """PATH as in the virtual environment cairn is installed in (the page says it must be)."""
    bin_dir = str(Path(sys.executable).parent)
    return os.pathsep.join([bin_dir, os.environ.get("PATH", os.defpath)])


def _reader_env() -> dict[str, str]:
    """A reader's shell: cairn on PATH, none of this machine's cairn or endpoint settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CAIRN_"))}
    return {**env, "PATH": _path_with_cairn(), "NO_PROXY": "127.0.0.1,localhost"}


def runnable_examples() -> list[str]:
    return RUNNABLE.findall(DOC.read_text(encoding="utf-8"))


def test_the_page_has_runnable_examples() -> None:
    assert len(runnable_examples()) >= 2


def _examples_by_index() -> list[object]:
    """The examples' indexes; one that starts a real ``cairn`` process is slow."""
    return [
        pytest.param(index, marks=[pytest.mark.slow] if '["cairn"' in code else [])
        for index, code in enumerate(runnable_examples())
    ]


@pytest.mark.parametrize("index", _examples_by_index())
def test_the_example_runs(index: int) -> None:
    code = runnable_examples()[index]

    finished = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env=_reader_env(),
    )  # fmt: skip

    assert finished.returncode == 0, finished.stderr


def test_the_example_script_loads(tmp_path: Path) -> None:
    [example] = JSON_BLOCK.findall(DOC.read_text(encoding="utf-8"))
    script = tmp_path / "script.json"
    script.write_text(example)

    queued, default = load_script(script)

    assert [q.purpose for q in queued] == [None, None, "recap"]
    assert default is not None
    assert json.loads(example)["default"] == {"text": default.text}


# ----- the examples use cairn's real names: tool arguments, the selector's answer -----

_TOOL_CALL = re.compile(r"tool_call\(\s*\"(\w+)\",\s*(\{.*?\})\s*\)")
_SCRIPT_CALL = re.compile(r"\{\"name\": \"(\w+)\", \"args\": (\{.*?\})\}")


def _scripted_tool_calls() -> list[tuple[str, dict[str, object]]]:
    text = DOC.read_text(encoding="utf-8")
    calls = [(name, json.loads(args)) for name, args in _SCRIPT_CALL.findall(text)]
    calls += [(name, json.loads(args)) for name, args in _TOOL_CALL.findall(text)]
    return calls


def test_every_scripted_tool_call_gives_the_tool_the_arguments_it_takes() -> None:
    """Regression: the page scripted `read_file` with `{"path": ...}`; the tool takes
    `file_path`, so a reader's copied script failed inside cairn."""
    from cairn.tools.registry import default_registry

    registry = default_registry()
    calls = _scripted_tool_calls()
    assert len(calls) >= 3
    for name, args in calls:
        tool = registry.get(name)
        assert tool is not None, name
        schema = tool.parameters
        assert set(schema.get("required", [])) <= set(args), (name, args)
        assert set(args) <= set(schema["properties"]), (name, args)


# ----- the hook test: a pytest file a reader copies -----


def _blocks(kind: str, language: str) -> list[str]:
    pattern = rf"<!-- docs-test: {kind} -->\n```{language}\n(.*?)```"
    return re.findall(pattern, DOC.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.slow
def test_the_hook_test_passes_when_run_with_pytest(tmp_path: Path) -> None:
    [example] = _blocks("pytest", "python")
    (tmp_path / "test_my_hook.py").write_text(example, encoding="utf-8")

    # Its own temp root: pytest's start-up removes old runs' folders from the shared one, which
    # after a full suite holds thousands of repositories (that took 50 s in CI).
    inner = ["-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'tmp'}", "test_my_hook.py"]
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", *inner],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env=_reader_env(),
    )  # fmt: skip

    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "1 passed" in finished.stdout


def test_the_page_says_the_hook_test_needs_cairn_on_path() -> None:
    section = DOC.read_text(encoding="utf-8").split("## The server on its own")[0]
    assert "`cairn` must be on your `PATH`" in " ".join(section.split())


# ----- the server as its own process -----


def _script(tmp_path: Path) -> Path:
    [example] = JSON_BLOCK.findall(DOC.read_text(encoding="utf-8"))
    script = tmp_path / "script.json"
    script.write_text(example, encoding="utf-8")
    return script


def test_the_server_command_serves_the_script_and_records_requests(tmp_path: Path) -> None:
    import httpx

    first, _ = _blocks("server-cli", "sh")
    command = shlex.split(first.strip())
    assert command[:3] == ["python", "-m", "cairn.testing.server"]
    _script(tmp_path)
    server = subprocess.Popen(
        [sys.executable, *command[1:]], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        answer = httpx.post(
            base_url + "/chat/completions",
            json={"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        ).json()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)

    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", base_url)
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read_file"
    [recorded] = (tmp_path / "requests.jsonl").read_text().splitlines()
    assert json.loads(recorded)["body"]["messages"][0]["content"] == "hi"
    assert server.returncode == 0


@pytest.mark.slow
def test_the_fixed_port_example_runs_as_written_in_bash(tmp_path: Path) -> None:
    """The server, then `cairn -p` pointed at it, then the server stopped: as a reader runs it."""
    _, second = _blocks("server-cli", "sh")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    _script(tmp_path)
    home = tmp_path / "home"
    env = {**_reader_env(), "HOME": str(home), "CAIRN_HOME": str(home / ".cairn")}

    finished = subprocess.run(
        ["bash", "--noprofile", "--norc", "-e", "-c", second.replace("8765", port)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "The README explains the install." in finished.stdout
