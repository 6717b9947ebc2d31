"""The daemon's routes over real HTTP, with a real runtime on the scripted model."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx

from cairn.daemon.routes import FEATURES
from cairn.testing import Reply, ScriptedServer, error_reply, reply, tool_call

from ..polling import eventually_async
from .conftest import StartDaemon
from .helpers import TOKEN, RunningDaemon, collect_until, of_type, updates

RECAP = "<recap>Fixing the login bug. Next: run the tests.</recap>"


# ----- discovery -----


async def test_health_answers_ok(daemon: RunningDaemon) -> None:
    response = await daemon.http.get("/health")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_deep_health_counts_sessions(daemon: RunningDaemon) -> None:
    await daemon.create_session()

    body = (await daemon.http.get("/health", params={"deep": "1"})).json()

    assert body["sessions"] == 1 and body["activePrompts"] == 0


async def test_capabilities_list_the_features_and_the_workspace(
    daemon: RunningDaemon, workspace: Path
) -> None:
    body = (await daemon.http.get("/capabilities")).json()

    assert body["v"] == 1
    assert body["mode"] == "in-process"
    assert body["workspaceCwd"] == str(workspace.resolve())
    assert "session_recap" in body["features"]
    assert set(FEATURES) <= set(body["features"])
    assert body["limits"]["maxSessions"] == 64


# ----- sessions -----


async def test_creating_a_session_returns_its_id(daemon: RunningDaemon, workspace: Path) -> None:
    body = (await daemon.http.post("/session", json={})).json()

    assert uuid.UUID(body["sessionId"])
    assert body["attached"] is False
    assert body["workspaceCwd"] == str(workspace.resolve())
    assert body["approvalMode"] == "default"
    assert daemon.registry.get(body["sessionId"]).session.id == body["sessionId"]


async def test_creating_with_a_live_id_attaches_to_it(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    body = (await daemon.http.post("/session", json={"sessionId": session_id})).json()

    assert body == {**body, "sessionId": session_id, "attached": True}
    assert len(daemon.registry) == 1


async def test_a_chosen_session_id_must_be_a_uuid(daemon: RunningDaemon) -> None:
    response = await daemon.http.post("/session", json={"sessionId": "../../etc"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_session_id"


async def test_a_session_for_another_workspace_is_refused(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    response = await daemon.http.post("/session", json={"cwd": str(tmp_path)})

    assert response.status_code == 400
    assert response.json()["code"] == "workspace_mismatch"


async def test_an_approval_mode_can_be_chosen_at_creation(daemon: RunningDaemon) -> None:
    body = (await daemon.http.post("/session", json={"approvalMode": "plan"})).json()

    assert body["approvalMode"] == "plan"
    bad = await daemon.http.post("/session", json={"approvalMode": "reckless"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_approval_mode"


async def test_the_session_limit_is_a_503_with_retry_after(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(max_sessions=2)
    await daemon.create_session()
    await daemon.create_session()

    response = await daemon.http.post("/session", json={})

    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.json() == {
        "error": "Session limit reached (2)",
        "code": "session_limit_exceeded",
        "limit": 2,
    }


async def test_a_closed_session_frees_its_slot(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(max_sessions=1)
    session_id = await daemon.create_session()
    await daemon.http.delete(f"/session/{session_id}")

    assert (await daemon.http.post("/session", json={})).status_code == 200


async def test_a_new_session_announces_its_commands_first_as_an_editor_sees_them(
    daemon: RunningDaemon,
) -> None:
    session_id = await daemon.create_session()

    frames = await collect_until(daemon.http, session_id, "session_update")
    listed = (await daemon.http.get(f"/session/{session_id}/commands")).json()

    [update] = updates(frames, "available_commands_update")
    names = [c["name"] for c in update["availableCommands"]]
    assert names[:3] == ["help", "clear", "compress"] and "recap" in names
    assert listed == {"sessionId": session_id, "commands": update["availableCommands"]}


async def test_status_describes_the_session(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    body = (await daemon.http.get(f"/session/{session_id}/status")).json()

    assert body["sessionId"] == session_id
    assert body["hasActivePrompt"] is False
    assert body["pendingPrompts"] == [] and body["pendingPermissions"] == []
    assert body["lastEventId"] == 1  # the session's commands, announced at creation


async def test_an_unknown_session_is_a_404_on_every_session_route(daemon: RunningDaemon) -> None:
    missing = str(uuid.uuid4())
    calls = [
        daemon.http.get(f"/session/{missing}/status"),
        daemon.http.post(f"/session/{missing}/prompt", json={"prompt": "hi"}),
        daemon.http.get(f"/session/{missing}/events"),
        daemon.http.post(f"/session/{missing}/cancel"),
        daemon.http.post(f"/session/{missing}/permission/r1", json={}),
        daemon.http.post(f"/session/{missing}/recap"),
        daemon.http.post(f"/session/{missing}/load"),
        daemon.http.delete(f"/session/{missing}"),
    ]

    for response in await asyncio.gather(*calls):
        assert response.status_code == 404, response.request.url
        assert response.json() == {
            "error": f'No session with id "{missing}"',
            "code": "session_not_found",
            "sessionId": missing,
        }


async def test_deleting_a_session_closes_it(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    response = await daemon.http.delete(f"/session/{session_id}")

    assert response.status_code == 204
    assert (await daemon.http.get(f"/session/{session_id}/status")).status_code == 404


async def test_the_workspace_lists_live_and_recorded_sessions(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    recorded = await daemon.create_session()
    prompt = await daemon.prompt(recorded, "remember me")
    await collect_until(daemon.http, recorded, "turn_complete")
    await daemon.http.delete(f"/session/{recorded}")
    live = await daemon.create_session()

    sessions = (await daemon.http.get("/workspace/sessions")).json()["sessions"]

    by_id = {s["sessionId"]: s for s in sessions}
    assert by_id[live]["live"] is True
    assert by_id[recorded]["live"] is False
    assert by_id[recorded]["displayName"] == "remember me"
    assert prompt["promptId"]


async def test_loading_a_recorded_session_replays_its_conversation(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.enqueue(reply("The answer is 42."), purpose="main")
    await daemon.prompt(session_id, "what is the answer?")
    await collect_until(daemon.http, session_id, "turn_complete")
    await daemon.http.delete(f"/session/{session_id}")

    body = (await daemon.http.post(f"/session/{session_id}/load", json={})).json()
    frames = await collect_until(daemon.http, session_id, "replay_complete")

    assert body["sessionId"] == session_id and body["attached"] is False
    assert [u["content"]["text"] for u in updates(frames, "user_message_chunk")] == [
        "what is the answer?"
    ]
    assert [u["content"]["text"] for u in updates(frames, "agent_message_chunk")] == [
        "The answer is 42."
    ]


async def test_loading_an_unreadable_recording_is_a_409_naming_why(daemon: RunningDaemon) -> None:
    """Regression: a recording that exists but cannot be read was answered as a missing one."""
    session_id = await daemon.create_session()
    await daemon.http.delete(f"/session/{session_id}")
    recording = daemon.runtime.chats_dir / f"{session_id}.jsonl"
    recording.unlink(missing_ok=True)
    recording.parent.mkdir(parents=True, exist_ok=True)
    recording.symlink_to("/proc/self/mem")  # reading it fails with EIO, even as root

    response = await daemon.http.post(f"/session/{session_id}/load", json={})

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "session_unreadable" and body["sessionId"] == session_id
    assert body["error"].startswith(f'Session "{session_id}" cannot be resumed:')


async def test_loading_a_live_session_attaches(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    body = (await daemon.http.post(f"/session/{session_id}/load")).json()

    assert body["attached"] is True


# ----- prompts -----


async def test_a_linked_workspace_file_reaches_the_model_and_a_bad_one_warns(
    daemon: RunningDaemon, scripted_server: ScriptedServer, workspace: Path
) -> None:
    """Regression: a resource_link became an `@/path` mention that nothing resolved."""
    (workspace / "spec.md").write_text("SPEC-CONTENT")
    (workspace / "docs").mkdir()
    session_id = await daemon.create_session()
    scripted_server.enqueue(reply("Read it."), purpose="main")
    blocks = [
        {"type": "text", "text": "read @docs and"},
        {"type": "resource_link", "name": "spec.md", "uri": (workspace / "spec.md").as_uri()},
    ]

    response = await daemon.http.post(f"/session/{session_id}/prompt", json={"prompt": blocks})
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    assert response.status_code == 202
    [request] = scripted_server.requests_for("main")
    assert "SPEC-CONTENT" in request.last_user_text()
    warnings = [
        u["content"]["text"]
        for u in updates(frames, "agent_message_chunk")
        if u.get("_meta", {}).get("cairn", {}).get("source") == "attachment"
    ]
    assert warnings == ["⚠ @docs is a folder; mention the files in it to attach them.\n\n"]


async def test_a_prompt_is_admitted_with_202_and_completes_on_the_stream(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.enqueue(reply(chunks=["Hel", "lo!"]), purpose="main")

    response = await daemon.http.post(f"/session/{session_id}/prompt", json={"prompt": "hi"})
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    assert response.status_code == 202
    admitted = response.json()
    assert admitted["lastEventId"] == 1  # after the commands announced at creation
    assert [u["content"]["text"] for u in updates(frames, "agent_message_chunk")] == ["Hel", "lo!"]
    [started] = of_type(frames, "turn_started")
    assert started.data["promptId"] == admitted["promptId"]
    [done] = of_type(frames, "turn_complete")
    assert done.data["promptId"] == admitted["promptId"]
    assert done.data["stopReason"] == "end_turn"
    assert done.data["text"] == "Hello!"
    assert done.data["sessionId"] == session_id


async def test_a_prompt_retried_with_its_idempotency_key_runs_once(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.default = reply("done once")
    headers = {"Idempotency-Key": "retry-me-1"}
    url = f"/session/{session_id}/prompt"

    first = await daemon.http.post(url, json={"prompt": "deploy"}, headers=headers)
    await collect_until(daemon.http, session_id, "turn_complete")
    again = await daemon.http.post(url, json={"prompt": "deploy"}, headers=headers)

    assert first.status_code == again.status_code == 202
    assert again.json()["promptId"] == first.json()["promptId"]
    assert again.json()["lastEventId"] == first.json()["lastEventId"]
    assert again.json()["replayed"] is True
    assert again.headers["Idempotent-Replayed"] == "true"
    assert [r.last_user_text() for r in scripted_server.requests_for("main")] == ["deploy"]


async def test_an_idempotency_key_reused_for_another_prompt_is_a_422(
    daemon: RunningDaemon,
) -> None:
    session_id = await daemon.create_session()
    url = f"/session/{session_id}/prompt"
    await daemon.http.post(url, json={"prompt": "one"}, headers={"Idempotency-Key": "k"})

    other = await daemon.http.post(url, json={"prompt": "two"}, headers={"Idempotency-Key": "k"})
    bad = await daemon.http.post(url, json={"prompt": "x"}, headers={"Idempotency-Key": "a b"})

    assert other.status_code == 422
    assert other.json()["code"] == "idempotency_key_reused"
    assert bad.status_code == 400
    assert bad.json()["code"] == "invalid_idempotency_key"


async def test_a_cut_answer_completes_with_max_tokens_not_end_turn(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    """Issue 33: the daemon's turn_complete said end_turn for an answer cut at its bound."""
    session_id = await daemon.create_session()
    scripted_server.enqueue(Reply(text="Par", finish_reason="length"), purpose="main")

    await daemon.prompt(session_id, "capital?")
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    [done] = of_type(frames, "turn_complete")
    assert done.data["stopReason"] == "max_tokens"
    assert done.data["finishReason"] == "length"
    said = [u["content"]["text"] for u in updates(frames, "agent_message_chunk")]
    assert any("cut at its output bound" in text for text in said)


async def test_a_loop_stop_says_its_loop_type(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.default = tool_call("list_directory", {"path": "."})

    await daemon.prompt(session_id, "loop")
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    [done] = of_type(frames, "turn_complete")
    assert done.data["loopType"] == "consecutive_identical_tool_calls"


async def test_prompts_of_a_session_run_in_arrival_order(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.enqueue(Reply(text="first", delay=0.2), purpose="main")
    scripted_server.enqueue(reply("second"), purpose="main")

    first = await daemon.prompt(session_id, "one")
    second = await daemon.prompt(session_id, "two")
    frames = await collect_until(daemon.http, session_id, "turn_complete", count=2)

    ends = of_type(frames, "turn_complete")
    assert [e.data["promptId"] for e in ends] == [first["promptId"], second["promptId"]]
    assert [e.data["text"] for e in ends] == ["first", "second"]
    assert [r.last_user_text() for r in scripted_server.requests_for("main")] == ["one", "two"]


async def test_a_sixth_pending_prompt_is_a_429(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.default = Reply(text="slow", delay=2)
    for i in range(5):
        await daemon.prompt(session_id, f"p{i}")

    response = await daemon.http.post(f"/session/{session_id}/prompt", json={"prompt": "p5"})

    assert response.status_code == 429
    assert response.json()["code"] == "prompt_queue_full"
    status = (await daemon.http.get(f"/session/{session_id}/status")).json()
    assert [p["state"] for p in status["pendingPrompts"]] == ["running"] + ["queued"] * 4


async def test_a_model_failure_ends_the_turn_with_turn_error(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.enqueue(error_reply(400, "bad request from the model"), purpose="main")

    admitted = await daemon.prompt(session_id, "hi")
    frames = await collect_until(daemon.http, session_id, "turn_error")

    [error] = of_type(frames, "turn_error")
    assert error.data["promptId"] == admitted["promptId"]
    assert error.data["code"] == "model_error"
    assert "bad request from the model" in error.data["message"]


async def test_a_slash_command_answers_in_turn_complete(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    await daemon.prompt(session_id, "/recap")
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    [done] = of_type(frames, "turn_complete")
    assert done.data["handledLocally"] is True
    assert done.data["text"] == "Not enough conversation context for a recap yet."
    [notice] = updates(frames, "agent_message_chunk")
    assert notice["content"]["text"] == "Not enough conversation context for a recap yet.\n\n"
    assert notice["_meta"] == {
        "cairn": {"kind": "notice", "level": "info", "source": "command:recap"}
    }


async def test_malformed_json_is_a_400_with_a_message(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    response = await daemon.http.post(
        f"/session/{session_id}/prompt",
        content=b'{"prompt": ',
        headers={"Content-Type": "application/json"},
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"
    assert response.json()["error"].startswith("Invalid JSON in request body")


async def test_a_client_id_is_stamped_on_the_events_of_its_prompt(
    daemon: RunningDaemon,
) -> None:
    session_id = await daemon.create_session()

    await daemon.http.post(
        f"/session/{session_id}/prompt",
        json={"prompt": "hi"},
        headers={"X-Cairn-Client-Id": "ed-1"},
    )
    async with daemon.http.stream(
        "GET", f"/session/{session_id}/events", headers={"Last-Event-ID": "0"}
    ) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and "turn_complete" in line:
                assert json.loads(line[6:])["originatorClientId"] == "ed-1"
                break


async def test_a_malformed_client_id_is_a_400(daemon: RunningDaemon) -> None:
    response = await daemon.http.get("/capabilities", headers={"X-Cairn-Client-Id": "bad id!"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_client_id"


# ----- cancel and permissions -----


async def test_cancel_stops_the_running_turn(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.enqueue(Reply(text="never", delay=10), purpose="main")
    await daemon.prompt(session_id, "slow")
    await scripted_server.async_wait_for_requests(1, purpose="main")

    response = await daemon.http.post(f"/session/{session_id}/cancel")
    frames = await collect_until(daemon.http, session_id, "turn_complete", timeout=3)

    assert response.status_code == 204
    assert of_type(frames, "turn_complete")[0].data["stopReason"] == "cancelled"


async def test_cancel_lets_queued_prompts_run(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    scripted_server.enqueue(Reply(text="never", delay=10), purpose="main")
    scripted_server.enqueue(reply("queued one ran"), purpose="main")
    await daemon.prompt(session_id, "slow")
    second = await daemon.prompt(session_id, "next")
    await scripted_server.async_wait_for_requests(1, purpose="main")

    await daemon.http.post(f"/session/{session_id}/cancel")
    frames = await collect_until(daemon.http, session_id, "turn_complete", count=2)

    assert of_type(frames, "turn_complete")[-1].data["promptId"] == second["promptId"]
    assert of_type(frames, "turn_complete")[-1].data["text"] == "queued one ran"


async def test_a_permission_vote_lets_the_tool_run(
    daemon: RunningDaemon, scripted_server: ScriptedServer, workspace: Path
) -> None:
    session_id = await daemon.create_session()
    target = workspace / "hello.txt"
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": str(target), "content": "hi\n"}), purpose="main"
    )
    scripted_server.enqueue(reply("Written."), purpose="main")
    await daemon.prompt(session_id, "write hello.txt")

    [request] = of_type(
        await collect_until(daemon.http, session_id, "permission_request"), "permission_request"
    )
    vote = await daemon.http.post(
        f"/session/{session_id}/permission/{request.data['requestId']}",
        json={"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    )
    again = await daemon.http.post(
        f"/session/{session_id}/permission/{request.data['requestId']}",
        json={"outcome": {"outcome": "selected", "optionId": "reject_once"}},
    )
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    assert vote.status_code == 200 and vote.json() == {}
    assert again.status_code == 404 and again.json()["code"] == "permission_not_found"
    assert target.read_text() == "hi\n"
    assert of_type(frames, "permission_resolved")[0].data["outcome"]["optionId"] == "allow_once"
    assert of_type(frames, "turn_complete")[0].data["text"] == "Written."


QUESTION = {
    "questions": [
        {"question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
    ]
}


async def test_a_question_open_when_the_session_closed_is_asked_again_after_a_load(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    """Regression: only ACP asked a pending ask_user_question again after a load."""
    session_id = await daemon.create_session()
    scripted_server.enqueue(tool_call("ask_user_question", QUESTION, id="ask-1"), purpose="main")
    await daemon.prompt(session_id, "set up the database")
    await collect_until(daemon.http, session_id, "permission_request")
    closed = await daemon.http.delete(f"/session/{session_id}")
    scripted_server.enqueue(reply("Postgres it is."), purpose="main")

    loaded = await daemon.http.post(f"/session/{session_id}/load", json={})
    [asked] = of_type(
        await collect_until(daemon.http, session_id, "permission_request"), "permission_request"
    )
    vote = await daemon.http.post(
        f"/session/{session_id}/permission/{asked.data['requestId']}",
        json={"answers": ["Postgres"]},
    )
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    assert closed.status_code == 204 and loaded.status_code == 200 and vote.status_code == 200
    assert asked.data["kind"] == "question"
    assert asked.data["questions"][0]["question"] == "Which database?"
    [done] = of_type(frames, "turn_complete")
    assert done.data["text"] == "Postgres it is."
    continued = scripted_server.requests_for("main")[-1]
    assert continued.contains("Which database?: Postgres")
    assert continued.user_texts().count("set up the database") == 1


async def test_an_unknown_command_is_answered_without_the_model(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()

    await daemon.prompt(session_id, "/frobnicate now")
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    [done] = of_type(frames, "turn_complete")
    assert done.data["text"] == "Unknown command /frobnicate. /help lists the commands."
    assert done.data["handledLocally"] is True
    assert scripted_server.requests_for("main") == []


async def test_cancel_resolves_a_pending_permission_as_cancelled(
    daemon: RunningDaemon, scripted_server: ScriptedServer, workspace: Path
) -> None:
    session_id = await daemon.create_session()
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": str(workspace / "x.txt"), "content": "x"}),
        purpose="main",
    )
    await daemon.prompt(session_id, "write")
    await collect_until(daemon.http, session_id, "permission_request")

    await daemon.http.post(f"/session/{session_id}/cancel")
    frames = await collect_until(daemon.http, session_id, "turn_complete")

    [resolved] = of_type(frames, "permission_resolved")
    assert resolved.data["outcome"] == {"outcome": "cancelled"}
    assert of_type(frames, "turn_complete")[0].data["stopReason"] == "cancelled"
    assert not (workspace / "x.txt").exists()


async def test_changing_the_approval_mode_needs_a_token_even_on_loopback(
    daemon: RunningDaemon,
) -> None:
    session_id = await daemon.create_session()

    response = await daemon.http.post(f"/session/{session_id}/approval-mode", json={"mode": "yolo"})

    assert response.status_code == 401
    assert response.json()["code"] == "token_required"
    assert daemon.registry.get(session_id).session.approval_mode == "default"


async def test_with_a_token_the_approval_mode_changes_and_is_announced_once(
    start_daemon: StartDaemon,
) -> None:
    daemon = await start_daemon(token=TOKEN)
    session_id = await daemon.create_session()

    response = await daemon.http.post(f"/session/{session_id}/approval-mode", json={"mode": "plan"})
    frames = await collect_until(daemon.http, session_id, "session_update", last_event_id=1)

    assert response.json() == {"sessionId": session_id, "mode": "plan", "previous": "default"}
    assert [(f.type, f.data) for f in frames] == [
        ("session_update", {"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    ]


# ----- recap -----


async def test_a_short_session_has_a_null_recap(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()

    response = await daemon.http.post(f"/session/{session_id}/recap")

    assert response.status_code == 200
    assert response.json() == {
        "sessionId": session_id,
        "recap": None,
        "reason": "Not enough conversation context for a recap yet.",
    }
    assert scripted_server.requests_for("recap") == []


async def test_a_recap_without_tags_that_reads_as_one_is_answered(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    """Issue 33: the recap route answered null for a recap a local model wrote untagged."""
    session_id = await daemon.create_session()
    await daemon.prompt(session_id, "fix the login bug")
    await collect_until(daemon.http, session_id, "turn_complete")
    scripted_server.enqueue(reply("Fixing the login bug. Next: run the tests."), purpose="recap")

    response = await daemon.http.post(f"/session/{session_id}/recap")

    assert response.json() == {
        "sessionId": session_id,
        "recap": "Fixing the login bug. Next: run the tests.",
    }


async def test_a_recap_summarises_the_conversation(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    await daemon.prompt(session_id, "fix the login bug")
    await collect_until(daemon.http, session_id, "turn_complete")
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    response = await daemon.http.post(f"/session/{session_id}/recap", json={"ignored": True})

    assert response.json() == {
        "sessionId": session_id,
        "recap": "Fixing the login bug. Next: run the tests.",
    }
    [request] = scripted_server.requests_for("recap")
    assert request.tools == [] and request.max_tokens == 300


async def test_the_recap_route_works_without_a_token_on_loopback(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    assert (
        await daemon.http.post(f"/session/{session_id}/recap", content=b"not json")
    ).status_code == 200


async def test_a_recap_is_bounded_by_the_recap_timeout(
    start_daemon: StartDaemon, scripted_server: ScriptedServer
) -> None:
    daemon = await start_daemon(recap_timeout_seconds=0.3)
    session_id = await daemon.create_session()
    await daemon.prompt(session_id, "hi")
    await collect_until(daemon.http, session_id, "turn_complete")
    scripted_server.enqueue(Reply(text=RECAP, delay=5), purpose="recap")

    response = await asyncio.wait_for(daemon.http.post(f"/session/{session_id}/recap"), 3)

    assert response.json()["recap"] is None
    assert response.json()["reason"] == "The model did not write a recap within 0.3 s."


async def test_a_client_disconnect_cancels_the_recap_query(
    daemon: RunningDaemon, scripted_server: ScriptedServer
) -> None:
    session_id = await daemon.create_session()
    await daemon.prompt(session_id, "hi")
    await collect_until(daemon.http, session_id, "turn_complete")
    scripted_server.enqueue(
        Reply(chunks=["<recap>", *["slow "] * 200], chunk_delay=0.02), purpose="recap"
    )
    async with httpx.AsyncClient(base_url=daemon.url, trust_env=False) as client:
        recap = asyncio.ensure_future(client.post(f"/session/{session_id}/recap"))
        [request] = await scripted_server.async_wait_for_requests(1, purpose="recap")
        recap.cancel()  # closes the connection to the daemon

    assert await eventually_async(lambda: bool(scripted_server.dropped))
    assert scripted_server.dropped == [request]
    body = (await daemon.http.get("/health", params={"deep": "1"})).json()
    assert body["activeRecaps"] == 0
