"""Two-phase Recall through the real ``cairn -p`` process and the scripted model server.

The project holds two memories under ``CAIRN_MEMORY_LOCAL=1``: one the prompt matches lexically
(the fast phase finds it) and one only the model selector picks (the refined phase delivers it).
The selector answers after 0.5 s, well past the first request's 100 ms wait, so the first model
request can only carry what the fast phase published.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from cairn.memory.recall.render import RELEVANT_MEMORY_HEADING
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply, tool_call

from ..polling import eventually_async
from .conftest import RunCairn, run_probed, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

DEPLOY_MARKER = "MARKER-HEADLESS-DEPLOY-8191"  # in the memory the prompt matches lexically
STYLE_MARKER = "MARKER-HEADLESS-STYLE-6007"  # in the memory only the selector picks
PROMPT = "how do we deploy the billing service?"
SELECTOR_DELAY = 0.5  # seconds: past the first request's 100 ms wait for Recall
TOOL_CALL_DELAY = 1.5  # seconds: the selector has settled when the tool result is sent
_MANIFEST_PATH = re.compile(r"^- \[\w+\] (\S+\.md) \(", re.MULTILINE)
AUTO_MEMORY_HEADING = "# auto memory"  # the system prompt's memory section
# The timing tests below are about the lexical lifecycle: semantic candidates would start the
# selector only after the first request left and the model loaded (later than SELECTOR_DELAY).
LEXICAL_MEMORY = {"memory": {"enableManagedAutoMemory": True, "semanticCandidates": False}}


@pytest.fixture
def memory_env(cairn_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {
        **cairn_env,
        "CAIRN_MEMORY_LOCAL": "1",
        "CAIRN_TELEMETRY_FILE": str(tmp_path / "telemetry.jsonl"),
    }


@pytest.fixture
def seeded(project: Path) -> Path:
    """The project with both memories on disk and a file for the model's tool call."""
    memory = project / ".cairn" / "memory" / "project"
    memory.mkdir(parents=True)
    (memory / "deploy.md").write_text(
        "---\nname: billing deploy checklist\ndescription: how we deploy the billing service\n"
        f"type: project\n---\n\n{DEPLOY_MARKER}: deploy billing with `make release`.\n"
    )
    (memory / "style.md").write_text(
        "---\nname: house code style\ndescription: formatting preferences\ntype: project\n---\n\n"
        f"{STYLE_MARKER}: tabs, never spaces.\n"
    )
    (project / "Makefile").write_text("release:\n\techo released\n")
    return project


def model(selector_picks: str) -> Any:
    """The scripted model: the selector picks ``selector_picks`` from its manifest after
    ``SELECTOR_DELAY``; the main conversation calls ``read_file`` once, then answers."""

    def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "recall-selector":
            listed = _MANIFEST_PATH.findall(request.last_user_text())
            chosen = [path for path in listed if Path(path).name == selector_picks]
            return Reply(text=json.dumps({"selected_memories": chosen}), delay=SELECTOR_DELAY)
        if request.purpose == "main":
            if not any(message["role"] == "tool" for message in request.messages):
                call = tool_call("read_file", {"file_path": "Makefile"})
                return Reply(tool_calls=call.tool_calls, delay=TOOL_CALL_DELAY)
            return reply("Run make release.")
        return reply("Nothing to save.")  # Extract after the turn

    return handle


def occurrences(request: RecordedRequest, text: str) -> int:
    return json.dumps(request.messages).count(text)


def message_index(request: RecordedRequest, text: str) -> int:
    return next(i for i, m in enumerate(request.messages) if text in json.dumps(m))


def deliveries(env: dict[str, str]) -> list[dict[str, Any]]:
    path = Path(env["CAIRN_TELEMETRY_FILE"])
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [event for event in events if event["event"] == "memory.recall.delivery"]


def test_fast_memory_is_in_the_first_request_and_the_refined_one_follows_the_tool_result(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    seeded: Path,
    memory_env: dict[str, str],
) -> None:
    write_settings(seeded, LEXICAL_MEMORY)
    scripted_server.handler = model(selector_picks="style.md")

    done = run_cairn("-p", PROMPT, env=memory_env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Run make release."
    [select] = scripted_server.requests_for("recall-selector")
    first, second = scripted_server.requests_for("main")
    # Fast phase: the lexical match is in the first request, sent before the selector answered.
    assert AUTO_MEMORY_HEADING in (first.system or "")
    assert first.contains(DEPLOY_MARKER)
    assert not first.contains(STYLE_MARKER)
    assert first.received_at < select.received_at + SELECTOR_DELAY
    # Refined phase: after the tool result, in a user message of the same request.
    roles = [message["role"] for message in second.messages]
    tool_at = roles.index("tool")
    memory_at = message_index(second, STYLE_MARKER)
    assert memory_at > tool_at
    assert roles[memory_at] == "user"
    assert RELEVANT_MEMORY_HEADING in json.dumps(second.messages[memory_at])
    assert second.messages[tool_at]["content"].startswith("release:")
    # Never twice: each memory appears once, the fast one only from the history.
    assert occurrences(second, DEPLOY_MARKER) == 1
    assert occurrences(second, STYLE_MARKER) == 1
    assert message_index(second, DEPLOY_MARKER) < tool_at
    assert [(e["phase"], e["delivery_point"]) for e in deliveries(memory_env)] == [
        ("fast", "initial"),
        ("refined", "tool_result"),
    ]


def test_a_selector_choosing_only_the_fast_memory_sends_nothing_again(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    seeded: Path,
    memory_env: dict[str, str],
) -> None:
    write_settings(seeded, LEXICAL_MEMORY)
    scripted_server.handler = model(selector_picks="deploy.md")

    done = run_cairn("-p", PROMPT, env=memory_env)

    assert done.returncode == 0, done.stderr
    first, second = scripted_server.requests_for("main")
    assert first.contains(DEPLOY_MARKER)
    assert occurrences(second, DEPLOY_MARKER) == 1
    assert occurrences(second, RELEVANT_MEMORY_HEADING) == 1  # the fast delivery, in the history
    terminal = deliveries(memory_env)[-1]
    assert (terminal["phase"], terminal["discard_reason"]) == ("refined", "already_delivered")


def test_with_managed_memory_off_there_is_no_recall_and_no_memory_prompt(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    seeded: Path,
    memory_env: dict[str, str],
) -> None:
    write_settings(seeded, {"memory": {"enableManagedAutoMemory": False}})
    scripted_server.handler = model(selector_picks="style.md")

    done = run_cairn("-p", PROMPT, env=memory_env)

    assert done.returncode == 0, done.stderr
    assert {request.purpose for request in scripted_server.requests} == {"main"}
    first, second = scripted_server.requests_for("main")
    for request in (first, second):
        assert AUTO_MEMORY_HEADING not in (request.system or "")
        assert not request.contains(DEPLOY_MARKER)
        assert not request.contains(STYLE_MARKER)
        assert RELEVANT_MEMORY_HEADING not in json.dumps(request.messages)


PARAPHRASE_PROMPT = "where do user photos live?"  # no content word of the memory
# The turn's first answer waits for the selector's request (up to this long), so the selector is
# asked before the turn ends even when loading the model takes seconds on a loaded machine.
SELECTOR_WAIT_SECONDS = 30.0
PICTURES = "image-storage.md"


def _seed_paraphrase(project: Path) -> None:
    """An old memory that shares no word with the prompt, behind 250 newer ones that match it
    neither by word: only its meaning can put it in front of the selector."""
    memory = project / ".cairn" / "memory"
    (memory / "reference").mkdir(parents=True)
    (memory / "project").mkdir(parents=True)
    target = memory / "reference" / PICTURES
    target.write_text(
        "---\nname: Image storage on S3\ndescription: Uploaded pictures are kept in an S3 "
        "bucket behind CloudFront\ntype: reference\n---\n\nOriginals are private.\n"
    )
    os.utime(target, (1_000_000_000, 1_000_000_000))
    for i in range(250):
        (memory / "project" / f"release-{i}.md").write_text(
            f"---\nname: Release note {i}\ndescription: Release {i} shipped the billing fix\n"
            "type: project\n---\n\nNothing else changed.\n"
        )


def _selector_sees(scripted_server: ScriptedServer) -> list[str]:
    """What the selector is shown. The turn's first answer (a tool call) waits until the
    selector has been asked, or :data:`SELECTOR_WAIT_SECONDS` when it never is."""
    listed: list[str] = []

    async def handle(request: RecordedRequest) -> Reply | None:
        if request.purpose == "recall-selector":
            listed.extend(_MANIFEST_PATH.findall(request.last_user_text()))
            return reply(json.dumps({"selected_memories": []}))
        if request.purpose == "main":
            if not any(message["role"] == "tool" for message in request.messages):
                await eventually_async(lambda: bool(listed), SELECTOR_WAIT_SECONDS)
                call = tool_call("read_file", {"file_path": "README.md"})
                return Reply(tool_calls=call.tool_calls)
            return reply("In S3.")
        return reply("Nothing to save.")

    scripted_server.handler = handle
    return listed


@pytest.mark.parametrize("semantic", [True, False], ids=["semantic", "semantic-off"])
def test_a_memory_sharing_no_word_with_the_prompt_reaches_the_selector_by_meaning(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    memory_env: dict[str, str],
    semantic: bool,
) -> None:
    """Issue #26: the selector is shown candidates chosen for the query, semantic ones included;
    ``memory.semanticCandidates: false`` leaves lexical and recent ones only. The vectors are
    computed first, as writing the memories would have (``cairn memory reindex``): a Recall
    leaves a backlog of more than 64 to the background (tests/memory/recall/test_semantic.py)."""
    _seed_paraphrase(project)
    (project / "README.md").write_text("A web shop.\n")
    write_settings(project, {"memory": {"semanticCandidates": semantic}})
    indexed = run_cairn("memory", "reindex", env=memory_env)
    assert indexed.returncode == 0, indexed.stderr
    listed = _selector_sees(scripted_server)

    done = run_cairn("-p", PARAPHRASE_PROMPT, env=memory_env)

    assert done.returncode == 0, done.stderr
    assert len(scripted_server.requests_for("recall-selector")) == 1
    assert len(listed) == 200  # the newest release notes fill the seats either way
    assert (f"project:reference/{PICTURES}" in listed) is semantic


_IMPORTS_PROBE = """
import atexit, json, sys
watched = ("Stemmer", "numpy", "tokenizers", "cairn.memory.store.embedding",
           "cairn.memory.store.encoder")
atexit.register(lambda: sys.stderr.write(
    "IMPORTED " + json.dumps([name for name in watched if name in sys.modules]) + "\\n"
))
from cairn.cli.main import main
sys.argv = ["cairn", "-p", sys.argv[1]]
main()
"""


def _imported(done: Any) -> list[str]:
    line = next(x for x in done.stderr.splitlines() if x.startswith("IMPORTED "))
    return list(json.loads(line.removeprefix("IMPORTED ")))


def test_the_embedding_model_is_loaded_only_by_a_recall_that_refines(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    memory_env: dict[str, str],
) -> None:
    """Issue #26: a session with no memory never loads the stemmer, numpy or the model; one
    whose recall reaches the selector loads them (on the refined path, which waits for the
    turn's first request: tests/memory/recall/test_query.py pins that order), and never a
    tokenizer library: cairn's encoder has its own WordPiece."""
    write_settings(project, {"memory": {"enableManagedAutoMemory": True}})
    scripted_server.enqueue(reply("Hello."), purpose="main")
    empty = run_probed(_IMPORTS_PROBE, project, memory_env, "hi")
    assert _imported(empty) == []

    _seed_paraphrase(project)
    (project / "README.md").write_text("A web shop.\n")
    assert run_cairn("memory", "reindex", env=memory_env).returncode == 0  # vectors, as written
    listed = _selector_sees(scripted_server)
    seeded = run_probed(_IMPORTS_PROBE, project, memory_env, PARAPHRASE_PROMPT)

    assert set(_imported(seeded)) == {
        "Stemmer",
        "numpy",
        "cairn.memory.store.embedding",
        "cairn.memory.store.encoder",
    }
    assert f"project:reference/{PICTURES}" in listed
