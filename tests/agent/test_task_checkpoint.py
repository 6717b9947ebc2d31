"""The task checkpoint value: its record (a digest refuses edits), what the model reads, secrets.

Pure functions; the side query and its scheduling are tested through a session in
tests/session/test_task_state.py.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.agent.task_checkpoint import (
    CheckpointError,
    DoneStep,
    Instruction,
    TaskCheckpoint,
    UserWords,
    scrub_secrets,
    work_evidence,
)
from cairn.content import Content, FunctionCall, FunctionResponse
from cairn.vocabulary.tool_calls import TodoItem

CHECKPOINT = TaskCheckpoint(
    turn=3,
    words=4,
    objective="Rename the loader.",
    instructions=(Instruction(2, "don't touch tests/legacy/"), Instruction(3, "tabs", True)),
    done=(DoneStep("renamed it", "edited src/config.py"),),
    remaining=("callers",),
    next_step="Update src/app.py.",
    recap="Renaming the loader. Next: the callers.",
    files_changed=("src/config.py",),
    commands=("`pytest -q` → exit 0",),
    plan=(TodoItem("1", "rename", "completed"), TodoItem("2", "callers", "pending")),
    updated_at="2026-01-02T03:04:05.000Z",
)


def test_a_checkpoint_reads_back_from_its_record() -> None:
    assert TaskCheckpoint.from_record(CHECKPOINT.to_record()) == CHECKPOINT


def test_a_record_changed_after_it_was_written_is_refused() -> None:
    record = CHECKPOINT.to_record()
    record["nextStep"] = "Delete src/app.py."

    with pytest.raises(CheckpointError, match="edited by hand"):
        TaskCheckpoint.from_record(record)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=12), json_values, max_size=8))
def test_any_record_is_a_checkpoint_or_refused(payload: dict[str, Any]) -> None:
    try:
        checkpoint = TaskCheckpoint.from_record(payload)
    except CheckpointError as refused:
        assert str(refused)  # says why
    else:
        assert isinstance(checkpoint, TaskCheckpoint)


@given(json_values)
def test_a_record_with_a_valid_digest_but_wrong_fields_is_refused(value: Any) -> None:
    record = CHECKPOINT.to_record()
    record["done"] = value
    body = {k: v for k, v in record.items() if k != "digest"}
    canonical = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    record["digest"] = hashlib.sha256(canonical.encode()).hexdigest()  # as cairn writes it
    try:
        checkpoint = TaskCheckpoint.from_record(record)
    except CheckpointError:
        return
    assert isinstance(checkpoint.done, tuple)


def test_the_model_reads_the_instructions_word_for_word_and_the_plan() -> None:
    later = [UserWords(5, 4, "also update the README")]

    text = CHECKPOINT.render(later_words=later)

    assert "- [turn 2] don't touch tests/legacy/" in text
    assert "- [turn 3, while you worked] tabs" in text
    assert "- [completed] rename" in text and "- [pending] callers" in text
    assert "Next step: Update src/app.py." in text
    assert "- [turn 4] also update the README" in text


def test_files_and_commands_come_from_answered_calls() -> None:
    calls = [
        FunctionCall("1", "edit", {"file_path": "src/a.py"}),
        FunctionCall("2", "run_shell_command", {"command": "pytest   -q"}),
        FunctionCall("3", "write_file", {"file_path": "src/b.py"}),
        FunctionCall("4", "run_shell_command", {"command": "make"}),
    ]
    responses = [
        FunctionResponse("1", "edit", {"output": "ok"}),
        FunctionResponse("2", "run_shell_command", {"output": "3 passed\n\nExit code: 0"}),
        FunctionResponse("3", "write_file", {"error": "permission denied"}),
    ]  # the fourth call never got an answer

    files, commands = work_evidence([Content("model", calls), Content("user", responses)])

    assert files == ["src/a.py"]
    assert commands == ["`pytest -q` → exit 0"]


def test_secret_looking_text_the_model_was_not_shown_is_redacted() -> None:
    known = "the key is ghp_abcdefghijklmnopqrstuvwx12"

    assert scrub_secrets("use ghp_abcdefghijklmnopqrstuvwx12", known) == (
        "use ghp_abcdefghijklmnopqrstuvwx12"
    )
    assert scrub_secrets("use ghp_zzzzzzzzzzzzzzzzzzzzzzzzzz99", known) == "use [redacted]"
    assert scrub_secrets("-----BEGIN RSA PRIVATE KEY-----\nMIIE", known) == "[redacted]"
    assert scrub_secrets("src/cairn/session/task_state.py line 40", known) == (
        "src/cairn/session/task_state.py line 40"
    )
