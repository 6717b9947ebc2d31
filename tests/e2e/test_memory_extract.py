"""Extract and Recall across two real ``cairn -p`` processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.memory.paths import memory_roots
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call

from ..memory.memory_helpers import unstamped
from .conftest import RunCairn, wait_for_extract_workers, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PREFERENCE = "By the way: I always use pytest for tests, never unittest."
MARKER = "MARKER-PYTEST-5150"  # only in the memory's body, never in its index line
MEMORY = f"""---
name: Tests use pytest
description: The user writes tests with pytest, never unittest
type: feedback
---

Write tests with pytest: plain asserts, no unittest.TestCase. {MARKER}

Why: the user said they always use pytest.
How to apply: whenever adding or changing tests.
"""


def model(memory_root: Path) -> object:
    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "extract":
            if request.messages[-1].get("role") == "tool":
                return reply("Saved.")
            target = memory_root / "feedback" / "testing-with-pytest.md"
            return tool_call("write_file", {"file_path": str(target), "content": MEMORY})
        if request.purpose == "recall-selector":
            return reply(json.dumps({"selected_memories": []}))
        return reply("Noted, pytest it is.")

    return handle


def test_a_preference_is_extracted_by_one_process_and_recalled_by_the_next(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, cairn_env: dict[str, str]
) -> None:
    write_settings(project, {})
    root = memory_roots(project, environ=cairn_env).project
    assert root is not None
    scripted_server.handler = model(root)  # type: ignore[assignment]

    first = run_cairn("-p", PREFERENCE)

    assert first.returncode == 0, first.stderr
    wait_for_extract_workers(project)  # -p handed its extraction to a worker
    [main] = scripted_server.requests_for("main")
    extract = scripted_server.requests_for("extract")
    assert extract and extract[0].received_at >= main.received_at
    assert extract[0].session_id == main.session_id
    saved = root / "feedback" / "testing-with-pytest.md"
    assert unstamped(saved.read_text()) == MEMORY
    assert "testing-with-pytest.md" in (root / "MEMORY.md").read_text()

    second = run_cairn("-p", "Should the new tests use pytest or unittest?")

    assert second.returncode == 0, second.stderr
    first_main, next_main = scripted_server.requests_for("main")[:2]
    assert next_main.session_id != first_main.session_id
    assert next_main.contains(MARKER)
