"""``cairn -p`` against the scripted server playing a local model server (issue 33): a small
context window it says in ``/props`` and enforces with llama.cpp's 400, and a model that
never stops."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply
from cairn.testing.fixtures import isolated_env

from .conftest import CAIRN, RunCairn, write_settings

pytestmark = pytest.mark.timeout(120)

WINDOW = 8192  # llama-server -c 8192
CHECKPOINT = {
    "objective": "Tell the user a long story.",
    "instructions": [],
    "done": [{"step": "Told a story of a lighthouse keeper", "evidence": "the answer"}],
    "remaining": [],
    "next_step": "Answer questions about the story.",
    "open_questions": [],
    "knowledge": ["the story is about a lighthouse keeper"],
    "recap": "A story was told. Next: answer questions about it.",
}


@pytest.fixture
def llama_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(context_window=WINDOW, flavour="llama.cpp") as server:
        yield server


@pytest.fixture
def run_local(llama_server: ScriptedServer, project: Path, tmp_path: Path) -> RunCairn:
    import subprocess

    env = isolated_env(llama_server.base_url, tmp_path / "local")

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CAIRN, *args], cwd=project, env=env, input="", capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip

    return run


def test_a_prompt_the_window_cannot_hold_is_a_clear_error_naming_the_window(
    run_local: RunCairn, llama_server: ScriptedServer, project: Path
) -> None:
    (project / "big.txt").write_text("The lighthouse keeper wrote the weather down. " * 3000)

    done = run_local("-p", "Summarize @big.txt", "-o", "json")

    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    result = json.loads(done.stdout)[-1]
    message = result["error"]["message"]
    assert message.startswith("API error: The prompt (")
    assert f"does not fit the model's context window of {WINDOW} tokens" in message
    assert "llama-server -c 32768" in message
    assert result["error"]["status"] == 400
    assert len(llama_server.requests_for("main")) == 1  # nothing to compress: not sent again


def test_a_conversation_that_outgrew_the_window_is_compressed_and_answered(
    run_local: RunCairn, llama_server: ScriptedServer
) -> None:
    """Issue 33: cairn did not compress on llama.cpp's exceed_context_size_error. Since issue
    29 (67a0a73) compression brings the task checkpoint up to date first (a `task-checkpoint`
    side query) and puts it in place of the older history, so no `compress` summary is asked."""

    def answer(request: RecordedRequest) -> Reply:
        if request.purpose == "task-checkpoint":
            return reply(json.dumps(CHECKPOINT))
        if "tell me a long story" in request.last_user_text():
            story = " ".join(f"On night {n} the keeper lit the lamp." for n in range(800))
            return reply(story)  # about 6,500 tokens
        return reply("The story was about a lighthouse.")

    llama_server.handler = answer
    first = run_local("-p", "tell me a long story")
    assert first.returncode == 0, first.stderr

    second = run_local("-p", "what was it about?", "--continue", "-o", "json")

    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout)[-1]
    assert result["result"] == "The story was about a lighthouse."
    # The first run's turn; the second's request refused as too long; the checkpoint brought up
    # to date for the compression; the request sent again, compressed.
    purposes = [r.purpose for r in llama_server.requests]
    assert purposes == ["main", "main", "task-checkpoint", "main"]
    refused, answered = llama_server.requests_for("main")[1:]
    assert "night 799" in json.dumps(refused.body)
    sent = json.dumps(answered.body)
    assert "night 799" not in sent  # the story was compressed away ...
    assert CHECKPOINT["objective"] in sent  # ... the checkpoint stands for it
    assert "tell me a long story" in sent  # the user's words are kept word for word
    assert answered.last_user_text().endswith("what was it about?")
    notices = [m for m in json.loads(second.stdout) if m.get("subtype") == "notice"]
    assert any(n["source"] == "compression" for n in notices)


def test_a_model_that_never_stops_is_cut_and_reported_as_cut(
    run_local: RunCairn, llama_server: ScriptedServer
) -> None:
    """Issue 33: with finish_reason length, `-p -o json` said `subtype: success`,
    `stop_reason: end_turn`, and nothing on stderr."""
    llama_server.default = Reply(text="The capital of France is Paris, ", endless=True)

    done = run_local("-p", "What is the capital of France?", "-o", "json")

    assert done.returncode == 54, done.stderr
    result = json.loads(done.stdout)[-1]
    assert (result["subtype"], result["stop_reason"], result["is_error"]) == (
        "error_max_tokens", "max_tokens", True,
    )  # fmt: skip
    assert result["error"]["message"] == "The answer is incomplete: it was cut at its output bound."
    assert result["usage"]["output_tokens"] >= 4000
    [request] = llama_server.requests_for("main")
    assert request.max_tokens == 8192  # the default bound; the 8 k window cut it first


def test_in_text_mode_a_cut_answer_is_said_on_stderr(
    run_local: RunCairn, llama_server: ScriptedServer, project: Path
) -> None:
    write_settings(project, {
        "memory": {"enableManagedAutoMemory": False},
        "model": {"generationConfig": {"maxOutputTokens": {"main": 64}}},
    })  # fmt: skip
    llama_server.default = Reply(text="Paris ", endless=True)

    done = run_local("-p", "Capital of France?")

    assert done.returncode == 54
    assert done.stdout.startswith("Paris ")
    assert done.stderr.splitlines() == [
        "The answer was cut at its output bound of 64 tokens "
        "(model.generationConfig.maxOutputTokens.main); send 'continue' to let the model go on.",
        "The answer is incomplete: it was cut at its output bound.",
    ]
