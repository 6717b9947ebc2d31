"""``cairn -p`` as a real process against the scripted model server.

The tests of a command line refused before any turn starts (a usage error, a misspelt command,
an empty prompt) run it through cairn's entry point in this process (``run_here``,
tests/entry_point.py): what they check is the argument handling, its message and exit code.
The exit code of bad input through a real process stays checked
(``test_a_bare_p_reads_the_prompt_from_stdin_as_claude_p_does``).
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from cairn.testing import Reply, ScriptedServer, error_reply, reply, tool_call

from ..entry_point import run_main
from .conftest import CAIRN, RunCairn, write_settings


@pytest.fixture
def run_here(cairn_env: dict[str, str], project: Path) -> RunCairn:
    """``run_cairn``'s command line run through cairn's entry point in this process."""

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_main(args, cwd=project, env=cairn_env, input=input or "")

    return run


def test_a_tool_call_loop_runs_the_tool_and_sends_its_result_back(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    (project / "hello.txt").write_text("greetings from the file\n")
    scripted_server.enqueue(tool_call("read_file", {"file_path": "hello.txt"}))
    scripted_server.enqueue(reply("The file greets you."))

    done = run_cairn("-p", "What does hello.txt say?")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "The file greets you.\n"
    first, second = scripted_server.requests
    assert first.purpose == second.purpose == "main"
    tool_messages = [m for m in second.messages if m["role"] == "tool"]
    assert tool_messages[0]["content"].startswith("greetings from the file")
    assert first.session_id and first.session_id == second.session_id


def test_json_output_is_one_array_ending_with_a_success_result(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(tool_call("list_directory", {"path": "."}))
    scripted_server.enqueue(reply("Two entries."))

    done = run_cairn("-p", "list", "--output-format", "json")

    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)
    assert [m["type"] for m in messages] == ["system", "assistant", "user", "assistant", "result"]
    result = messages[-1]
    assert result["subtype"] == "success"
    assert result["result"] == "Two entries."
    assert result["num_turns"] == 2
    assert result["usage"]["input_tokens"] > 0
    assert isinstance(result["duration_ms"], int)
    assert messages[1]["message"]["content"][0]["type"] == "tool_use"


def test_stream_json_prints_one_object_per_line_as_it_happens(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply(chunks=["Hel", "lo"]))

    done = run_cairn("-p", "hi", "-o", "stream-json")

    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "system" and lines[0]["subtype"] == "init"
    assert lines[1]["message"]["content"] == [{"type": "text", "text": "Hello"}]
    assert lines[-1]["type"] == "result" and lines[-1]["subtype"] == "success"


def test_partial_messages_stream_each_chunk_as_a_stream_event(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Issue 33: -o stream-json printed a 256-token answer in one burst at the end."""
    scripted_server.enqueue(reply(chunks=["Par", "is ", "is the capital."]))

    done = run_cairn("-p", "capital?", "-o", "stream-json", "--include-partial-messages")

    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    events = [line["event"] for line in lines if line["type"] == "stream_event"]
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert deltas == ["Par", "is ", "is the capital."]
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    kinds = [line["type"] for line in lines]
    assert kinds.index("assistant") > kinds.index("stream_event")
    assert kinds[-1] == "result"


def test_partial_messages_without_stream_json_is_bad_input(run_here: RunCairn) -> None:
    done = run_here("-p", "hi", "--include-partial-messages")

    assert done.returncode == 42
    assert done.stderr == "--include-partial-messages needs --output-format stream-json\n"


def test_text_output_streams_chunks_to_stdout(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply(chunks=["one ", "two ", "three"]))
    done = run_cairn("-p", "count")
    assert done.stdout == "one two three\n"


def test_a_prompt_on_stdin_runs_headless(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply("from stdin"))
    done = run_cairn(input="what is on stdin?\n")
    assert done.returncode == 0, done.stderr
    assert scripted_server.requests[0].last_user_text().strip() == "what is on stdin?"


def test_a_bare_p_reads_the_prompt_from_stdin_as_claude_p_does(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Regression: `echo hi | cairn -p` (and `... | cairn -p -o json`) stopped at "Option '-p'
    requires an argument" / "No such command 'json'": -p took the next option as its prompt."""
    scripted_server.enqueue(reply("plain"), reply("as json"), purpose="main")

    plain = run_cairn("-p", input="first question\n")
    as_json = run_cairn("-p", "-o", "json", input="second question\n")
    nothing = run_cairn("-p")

    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "plain\n"
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)[-1]["result"] == "as json"
    texts = [r.last_user_text().strip() for r in scripted_server.requests_for("main")]
    assert texts == ["first question", "second question"]
    assert nothing.returncode == 42
    assert "No prompt given" in nothing.stderr


def test_a_prompt_on_the_command_line_with_piped_input_runs_headless(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """`git diff | cairn "review this"`: no terminal to open the UI in, so one turn, as -p."""
    scripted_server.enqueue(reply("Looks fine."), purpose="main")

    done = run_cairn("review", "this", input="+ added a line\n")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "Looks fine.\n"
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "+ added a line\n\n\nreview this"


def test_a_misspelt_command_is_not_sent_as_a_prompt(
    run_here: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Words that name no command are a first prompt, but `cairn memroy list` is a typo: it
    says which command was meant instead of sending "memroy list" to the model."""
    done = run_here("memroy", "list", input="piped\n")

    assert done.returncode == 42
    assert "cairn memory" in done.stderr and "memroy" in done.stderr
    assert scripted_server.requests == []


def test_an_unknown_command_word_with_options_still_says_what_is_wrong(
    run_here: RunCairn, scripted_server: ScriptedServer
) -> None:
    done = run_here("fix it", "--no-such-option")

    assert done.returncode == 42
    assert "--no-such-option" in done.stderr
    assert scripted_server.requests == []


def test_no_endpoint_configured_is_one_clear_message_and_exit_41(
    run_cairn: RunCairn, cairn_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    env = {k: v for k, v in cairn_env.items() if not k.startswith("OPENAI_")}
    done = run_cairn("-p", "hi", env=env)
    assert done.returncode == 41
    assert "OPENAI_API_KEY" in done.stderr and "OPENAI_BASE_URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert scripted_server.requests == []


def test_an_empty_prompt_is_bad_input(run_here: RunCairn) -> None:
    done = run_here("-p", "   ")
    assert done.returncode == 42
    assert "No prompt" in done.stderr


def test_resuming_an_unknown_session_is_bad_input(run_cairn: RunCairn) -> None:
    done = run_cairn("-p", "hi", "--resume", "0" * 32)
    assert done.returncode == 42
    assert "No session found" in done.stderr


def test_resuming_an_unreadable_recording_is_bad_input(
    run_cairn: RunCairn, scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    """Regression: a recording that exists but cannot be read crashed `cairn -p --resume` with
    "internal error ... This is a bug" (exit 1) instead of saying so (exit 42)."""
    scripted_server.enqueue(reply("Hello."))
    first = run_cairn("-p", "hi", "-o", "json")
    session_id = json.loads(first.stdout)[-1]["session_id"]
    [recording] = Path(cairn_env["CAIRN_HOME"]).glob(f"projects/*/chats/{session_id}.jsonl")
    recording.unlink()
    recording.symlink_to("/proc/self/mem")  # reading it fails with EIO, even as root

    done = run_cairn("-p", "and now?", "--resume", session_id)

    assert done.returncode == 42
    assert f'Session "{session_id}" cannot be resumed' in done.stderr
    assert "internal error" not in done.stderr
    assert len(scripted_server.requests) == 1


def test_a_400_is_not_retried_and_exits_1(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(error_reply(400, "bad request: unknown field"))
    done = run_cairn("-p", "hi", "-o", "json")
    assert done.returncode == 1
    assert len(scripted_server.requests) == 1
    result = json.loads(done.stdout)[-1]
    assert result["subtype"] == "error_during_execution"
    assert "unknown field" in result["error"]["message"]


def test_a_500_is_retried_and_the_turn_succeeds(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(error_reply(500, "overloaded", retry_after=0))
    scripted_server.enqueue(reply("recovered"))
    done = run_cairn("-p", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "recovered\n"
    assert len(scripted_server.requests) == 2


def test_each_retry_prints_its_attempt_and_delay_on_stderr(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Regression (#16): `-p` printed only "[retrying: …]", without attempt or delay."""
    scripted_server.enqueue(error_reply(500, "overloaded", retry_after=0))
    scripted_server.enqueue(error_reply(503, "still busy", retry_after=0))
    scripted_server.enqueue(reply("recovered"))

    done = run_cairn("-p", "hi")

    assert done.returncode == 0, done.stderr
    assert "retrying in 0 s (attempt 2 of 7): HTTP 500: overloaded" in done.stderr
    assert "retrying in 0 s (attempt 3 of 7): HTTP 503: still busy" in done.stderr


def test_a_refused_connection_fails_after_one_retry_naming_the_url_and_the_variable(
    run_cairn: RunCairn, cairn_env: dict[str, str]
) -> None:
    """Regression (#16): a refused connection (a typo in the base URL) took 78 s to fail."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"

    done = run_cairn("-p", "hi", env={**cairn_env, "OPENAI_BASE_URL": url})

    assert done.returncode == 1
    assert done.stderr.count("retrying in 0.5 s (attempt 2 of 2)") == 1
    last = done.stderr.strip().splitlines()[-1]
    assert f"cannot connect to {url}/chat/completions" in last
    assert "connection refused" in last and "OPENAI_BASE_URL" in last
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("status", "message", "flags", "advice"),
    [
        (401, "Incorrect API key provided", [], "Check the API key (OPENAI_API_KEY)."),
        (
            404,
            "The model `gtp-5` does not exist",
            ["--model", "gtp-5"],
            "Check the model name (--model) and the base URL (OPENAI_BASE_URL).",
        ),
    ],
)
def test_a_refusal_the_configuration_causes_names_the_setting_to_fix(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    status: int,
    message: str,
    flags: list[str],
    advice: str,
) -> None:
    """Regression: a wrong API key or model name failed with only the endpoint's words ("HTTP
    401: Incorrect API key provided"), leaving the user to guess which setting to fix."""
    scripted_server.enqueue(error_reply(status, message))

    done = run_cairn("-p", "hi", *flags)

    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == f"API error: HTTP {status}: {message}. {advice}"


def test_a_malformed_answer_is_retried_then_reported_not_called_a_bug(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Regression (#18): a chunk whose delta is a string ended `-p` with "internal error …
    This is a bug" and no retry."""
    scripted_server.default = Reply(raw_sse=['{"choices":[{"index":0,"delta":"text"}]}', "[DONE]"])

    done = run_cairn("-p", "hi")

    assert done.returncode == 1
    assert "This is a bug" not in done.stderr and "internal error" not in done.stderr
    assert "malformed chunk from the model: choices[0].delta is a string" in done.stderr
    assert len(scripted_server.requests) == 3


def test_a_dropped_stream_is_retried(run_cairn: RunCairn, scripted_server: ScriptedServer) -> None:
    scripted_server.enqueue(reply(chunks=["par", "tial", "never"], drop_after_chunks=2))
    scripted_server.enqueue(reply("complete answer"))
    done = run_cairn("-p", "hi")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("complete answer\n")
    assert "retrying" in done.stderr
    assert len(scripted_server.requests) == 2


def test_the_session_turn_limit_exits_53(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(tool_call("list_directory", {"path": "."}))
    scripted_server.enqueue(reply("never reached"))
    done = run_cairn("-p", "hi", "--max-session-turns", "1", "-o", "json")
    assert done.returncode == 53
    assert json.loads(done.stdout)[-1]["subtype"] == "error_max_turns"
    assert len(scripted_server.requests) == 1


def test_ctrl_c_cancels_the_turn_and_exits_130(
    cairn_env: dict[str, str], scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(reply("too late", delay=30))
    process = subprocess.Popen(
        [*CAIRN, "-p", "hi"],
        cwd=project,
        env=cairn_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    scripted_server.wait_for_requests(1, timeout=20)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 130
    assert "Traceback" not in stderr


def test_resume_rebuilds_history_even_after_a_crash_truncated_line(
    run_cairn: RunCairn, scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    scripted_server.enqueue(reply("The capital is Paris."))
    first = run_cairn("-p", "What is the capital of France?", "-o", "json")
    session_id = json.loads(first.stdout)[-1]["session_id"]
    chats = list(Path(cairn_env["CAIRN_HOME"]).glob(f"projects/*/chats/{session_id}.jsonl"))
    assert len(chats) == 1
    with chats[0].open("a") as handle:
        handle.write('{"uuid": "torn", "parentUuid": ')  # a crash mid-write

    scripted_server.enqueue(reply("You asked about France."))
    second = run_cairn("-p", "What did I ask?", "--resume", session_id)

    assert second.returncode == 0, second.stderr
    messages = scripted_server.requests[1].messages
    texts = [m.get("content") for m in messages]
    assert "What is the capital of France?" in " ".join(str(t) for t in texts)
    assert "The capital is Paris." in texts


def test_continue_resumes_the_latest_session(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply("first answer"))
    run_cairn("-p", "remember the word pelican")
    scripted_server.enqueue(reply("pelican"))
    done = run_cairn("-p", "which word?", "--continue")
    assert done.returncode == 0, done.stderr
    assert scripted_server.requests[1].contains("remember the word pelican")


def test_continue_without_an_earlier_session_starts_a_new_one_with_a_warning(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """#16: `-p --continue` in a project with no recording exited 42 while the terminal UI
    started a new session; both now start a new session and say so."""
    scripted_server.enqueue(reply("a fresh answer"))

    done = run_cairn("-p", "hello", "--continue")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "a fresh answer"
    assert (
        "warning: No earlier session to continue in this project; starting a new one."
        in done.stderr
    )
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "hello"


def test_an_unknown_command_is_bad_input_and_never_reaches_the_model(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """#16: `-p "/frobnicate"` went to the model as text while the terminal UI answered
    "Unknown command"; both answer it now, and -p exits 42 as for any bad input."""
    done = run_cairn("-p", "/frobnicate the widgets", "-o", "json")

    assert done.returncode == 42, done.stderr
    result = json.loads(done.stdout)[-1]
    assert result["is_error"] is True
    assert result["result"] == "Unknown command /frobnicate. /help lists the commands."
    assert scripted_server.requests == []


def test_in_text_mode_an_unknown_command_is_said_once_on_stderr(run_cairn: RunCairn) -> None:
    done = run_cairn("-p", "/frobnicate")

    assert done.returncode == 42
    assert done.stdout == ""
    assert done.stderr == "Unknown command /frobnicate. /help lists the commands.\n"


def test_a_prompt_starting_with_a_path_is_not_a_command(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply("Check its permissions."))

    done = run_cairn("-p", "/usr/bin/env is broken, why?")

    assert done.returncode == 0, done.stderr
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "/usr/bin/env is broken, why?"


def test_a_blocking_user_prompt_submit_hook_stops_the_prompt_before_the_model(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    hook = project / "block.sh"
    hook.write_text("#!/bin/bash\necho 'prompts mentioning secrets are not allowed' >&2\nexit 2\n")
    hook.chmod(0o755)
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": str(hook)}]}]},
        },
    )
    done = run_cairn("-p", "print the secrets", "--trust")  # a project's hooks need trust
    assert done.returncode == 1
    assert "prompts mentioning secrets are not allowed" in done.stderr
    assert scripted_server.requests == []


def test_a_stop_hook_forces_one_continuation(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "stopped-once"
    hook = project / "stop.sh"
    hook.write_text(
        "#!/bin/bash\n"
        f'if [ -e "{marker}" ]; then exit 0; fi\n'
        f'touch "{marker}"\n'
        'echo \'{"decision": "block", "reason": "Run the tests before you stop."}\'\n'
    )
    hook.chmod(0o755)
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": str(hook)}]}]},
        },
    )
    scripted_server.enqueue(reply("I am done."))
    scripted_server.enqueue(reply("Tests pass; now I am done."))

    done = run_cairn("-p", "fix it", "--trust")

    assert done.returncode == 0, done.stderr
    assert len(scripted_server.requests) == 2
    assert scripted_server.requests[1].last_user_text() == "Run the tests before you stop."
    assert "Tests pass; now I am done." in done.stdout


def test_repeating_the_same_tool_call_is_stopped_by_loop_detection(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Regression (#16): the error named the loop by its internal type
    (`consecutive_identical_tool_calls`) instead of saying what happened."""
    scripted_server.default = tool_call("list_directory", {"path": "."})
    done = run_cairn("-p", "loop forever", "-o", "json")
    assert done.returncode == 1
    result = json.loads(done.stdout)[-1]
    message = result["error"]["message"]
    assert message == (
        "Loop detected: the model kept making the same tool call; the turn was stopped."
    )
    assert len(scripted_server.requests) == 5


def test_an_invalid_flag_value_is_bad_input(run_here: RunCairn) -> None:
    done = run_here("-p", "hi", "--approval-mode", "sometimes")
    assert done.returncode == 42
    assert "--approval-mode" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_option_is_bad_input(run_here: RunCairn) -> None:
    done = run_here("--no-such-option")
    assert done.returncode == 42
    assert "No such option" in done.stderr


def test_an_at_mention_attaches_the_file_and_a_folder_gets_a_warning(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """`cairn -p` attaches `@path` mentions with the same builder as the terminal UI."""
    (project / "notes.txt").write_text("MENTIONED-CONTENT\n")
    (project / "src").mkdir()
    scripted_server.enqueue(reply("Summarised."))

    done = run_cairn("-p", "summarise @notes.txt and @src")

    assert done.returncode == 0, done.stderr
    [request] = scripted_server.requests
    assert "MENTIONED-CONTENT" in request.last_user_text()
    assert "summarise @notes.txt and @src" in request.last_user_text()
    assert "@src is a folder; mention the files in it to attach them." in done.stderr


def _png() -> bytes:
    import io

    from PIL import Image as PilImage

    buffer = io.BytesIO()
    PilImage.new("RGB", (8, 6), (200, 30, 30)).save(buffer, "PNG")
    return buffer.getvalue()


def test_read_file_of_an_image_sends_the_image_to_the_model(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    raw = _png()
    (project / "red.png").write_bytes(raw)
    scripted_server.enqueue(tool_call("read_file", {"file_path": "red.png"}), reply("It is red."))

    done = run_cairn("-p", "what colour is red.png?")

    assert done.returncode == 0, done.stderr
    second = scripted_server.requests[1]
    assert second.images == ["data:image/png;base64," + base64.b64encode(raw).decode()]
    tool_message = next(m for m in second.messages if m["role"] == "tool")
    assert tool_message["content"].startswith("Read image red.png (image/png,")


def test_a_text_only_model_gets_a_note_naming_the_image_read(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    (project / "red.png").write_bytes(_png())
    write_settings(
        project, {"memory": {"enableManagedAutoMemory": False}, "model": {"supportsImages": False}}
    )
    scripted_server.enqueue(tool_call("read_file", {"file_path": "red.png"}), reply("No idea."))

    done = run_cairn("-p", "what colour is red.png?")

    assert done.returncode == 0, done.stderr
    second = scripted_server.requests[1]
    assert second.images == []
    tool_message = next(m for m in second.messages if m["role"] == "tool")
    assert "[image red.png (image/png," in tool_message["content"]
    assert "model.supportsImages is false" in tool_message["content"]


def test_the_json_result_reports_tokens_read_from_the_prompt_cache(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    from cairn.testing.cache import PromptCache

    scripted_server.prompt_cache = PromptCache("marked")
    write_settings(
        project, {"memory": {"enableManagedAutoMemory": False}, "model": {"promptCaching": "on"}}
    )
    scripted_server.enqueue(tool_call("list_directory", {"path": "."}), reply("Done."))

    done = run_cairn("-p", "list", "-o", "json")

    assert done.returncode == 0, done.stderr
    usage = json.loads(done.stdout)[-1]["usage"]
    assert 0 < usage["cache_read_input_tokens"] < usage["input_tokens"]
