"""What one replica of ``cairn serve --database`` recorded, another serves (#31): the recap,
a rewind and the task checkpoint of a session whose turns ran on replica A, asked of replica B.
In-process replicas over one real PostgreSQL (tests/daemon/test_replicas.py's fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from cairn.agent.task_checkpoint import TASK_CHECKPOINT_PURPOSE
from cairn.recording.records import TASK_CHECKPOINT
from cairn.session import task_state as task_state_module
from cairn.testing import ScriptedServer, reply, tool_call

from ..memory.postgres_helpers import postgres_dsn, postgres_server
from ..polling import eventually_async
from .helpers import collect_until, said
from .test_replicas import TOKEN, StartReplica, lease_row, start_replica

__all__ = ["postgres_dsn", "postgres_server", "start_replica"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

RECAP = "<recap>Fixing the login bug. Next: run the tests.</recap>"
CHECKPOINT_RECAP = "Fixing the login bug. Next: run the tests in tests/auth/."
GIVEN_UP_SOON = {"linger_seconds": 0.1}  # the lease is free again as soon as a turn is over


def recorded(dsn: str, session_id: str, subtype: str) -> list[dict[str, object]]:
    """The session's records of a system subtype, as the database holds them."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SELECT set_config('cairn.tenant', '(none)', false)")
        rows = connection.execute(
            "SELECT record FROM cairn_session_records WHERE session_id = %s ORDER BY seq",
            (session_id,),
        ).fetchall()
    records = [json.loads(row[0]) for row in rows]
    return [r for r in records if r.get("subtype") == subtype]


async def lease_given_up(dsn: str, session_id: str) -> bool:
    return await eventually_async(lambda: lease_row(dsn, session_id)[0] is None)


async def test_a_session_run_on_one_replica_is_recapped_by_another(
    start_replica: StartReplica, scripted_server: ScriptedServer, postgres_dsn: str
) -> None:
    a = await start_replica("a", **GIVEN_UP_SOON)
    b = await start_replica("b", **GIVEN_UP_SOON)
    session_id = await a.create_session()
    await a.prompt(session_id, "fix the login bug")
    await collect_until(a.http, session_id, "turn_complete")
    assert await lease_given_up(postgres_dsn, session_id)
    epoch = lease_row(postgres_dsn, session_id)[1]
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    response = await b.http.post(f"/session/{session_id}/recap")

    assert response.status_code == 200, response.text
    assert response.json() == {
        "sessionId": session_id,
        "recap": "Fixing the login bug. Next: run the tests.",
    }
    assert lease_row(postgres_dsn, session_id)[1] > epoch  # b took the lease: b answered
    [asked] = scripted_server.requests_for("recap")
    assert "fix the login bug" in json.dumps(asked.body)


async def test_a_session_run_on_one_replica_is_rewound_by_another(
    start_replica: StartReplica, scripted_server: ScriptedServer, postgres_dsn: str,
    workspace: Path,
) -> None:  # fmt: skip
    """Both turns ran on a; b lists them, rewinds the conversation (and, with the replicas
    sharing a cairn home as here, the code) to before the second, and the next turn, on a,
    no longer sees it."""
    a = await start_replica("a", token=TOKEN, **GIVEN_UP_SOON)
    b = await start_replica("b", token=TOKEN, **GIVEN_UP_SOON)
    session_id = await a.create_session(approvalMode="yolo")
    for number, (text, content) in enumerate(
        [("write the notes", "one\n"), ("rewrite the notes", "two\n")], start=1
    ):
        scripted_server.enqueue(
            tool_call("write_file", {"file_path": "notes.md", "content": content}),
            reply("Wrote."),
        )
        await a.prompt(session_id, text)
        await collect_until(a.http, session_id, "turn_complete", count=number)
    assert await lease_given_up(postgres_dsn, session_id)

    listing = await b.http.get(f"/session/{session_id}/rewind")
    rewound = await b.http.post(f"/session/{session_id}/rewind", json={"turn": 2})
    assert await lease_given_up(postgres_dsn, session_id)
    await a.prompt(session_id, "what is in the notes?")
    await collect_until(a.http, session_id, "turn_complete", count=3)

    assert listing.status_code == 200, listing.text
    assert [t["turn"] for t in listing.json()["turns"]] == [2, 1]
    assert rewound.status_code == 200, rewound.text
    body = rewound.json()
    assert (body["prompt"], body["conversationRewound"]) == ("rewrite the notes", True)
    assert (workspace / "notes.md").read_text() == "one\n"
    last = scripted_server.requests_for("main")[-1]
    assert said(last) == "what is in the notes?"
    assert "rewrite the notes" not in json.dumps(last.body)
    assert "write the notes" in json.dumps(last.body)


async def test_the_task_checkpoint_written_after_a_turn_is_kept_and_another_replica_recaps_it(
    start_replica: StartReplica,
    scripted_server: ScriptedServer,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checkpoint's side query runs once the session has been quiet, after the replica
    would have given the lease up: it keeps the lease until the checkpoint is recorded (it was
    dropped, unrecorded), and another replica's recap is the checkpoint's line, without asking
    the model."""
    monkeypatch.setattr(task_state_module, "IDLE_SECONDS", 0.5)  # quiet for longer than 0.1 s
    a = await start_replica("a", **GIVEN_UP_SOON)
    b = await start_replica("b", **GIVEN_UP_SOON)
    session_id = await a.create_session()
    scripted_server.enqueue(checkpoint_reply(), purpose=TASK_CHECKPOINT_PURPOSE)
    await a.prompt(session_id, "fix the login bug")
    await collect_until(a.http, session_id, "turn_complete")

    assert await eventually_async(
        lambda: len(recorded(postgres_dsn, session_id, TASK_CHECKPOINT)) == 1
    )
    assert await lease_given_up(postgres_dsn, session_id)
    response = await b.http.post(f"/session/{session_id}/recap")

    assert response.json() == {"sessionId": session_id, "recap": CHECKPOINT_RECAP}
    assert scripted_server.requests_for("recap") == []


def checkpoint_reply() -> object:
    return reply(
        json.dumps(
            {
                "objective": "Fix the login bug.",
                "instructions": [],
                "done": [{"step": "Found the bug", "evidence": "read src/auth.py"}],
                "remaining": ["run the tests"],
                "next_step": "Run the tests in tests/auth/.",
                "open_questions": [],
                "knowledge": [],
                "recap": CHECKPOINT_RECAP,
            }
        )
    )
