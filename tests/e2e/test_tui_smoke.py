"""The real ``cairn`` terminal UI in a real terminal (tmux) against the scripted model server."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply

from ..polling import eventually

TMUX = shutil.which("tmux") or "/usr/bin/tmux"
CAIRN = Path(sys.executable).with_name("cairn")
WAIT_SECONDS = 30.0  # generous: a cold start imports Textual

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(TMUX).exists(), reason="tmux is not installed"),
]


class Tmux:
    """One detached tmux server on a private socket, with one window running ``command``."""

    def __init__(self, env: dict[str, str]) -> None:
        self.socket = f"cairn-test-{uuid.uuid4().hex[:8]}"
        self.env = env

    def run(self, *args: str, check: bool = True) -> str:
        result = subprocess.run(
            [TMUX, "-L", self.socket, *args],
            env=self.env, capture_output=True, text=True, check=check, timeout=10,
        )
        return result.stdout

    def start(self, command: list[str], cwd: Path) -> None:
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "110", "-y", "34",
                 "-c", str(cwd), *command)
        self.run("set-option", "-t", "main", "remain-on-exit", "on")  # keep the last screen

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "main")

    def printed(self) -> str:
        """The screen and what scrolled off it (tmux's "Pane is dead" line can push a line up)."""
        return self.run("capture-pane", "-p", "-S", "-", "-t", "main")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "main", *keys)

    def kill(self) -> None:
        self.run("kill-server", check=False)


def wait_until(condition: Callable[[], bool], what: str, screen: Callable[[], str]) -> None:
    if not eventually(condition, WAIT_SECONDS):
        raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{screen()}")


@pytest.fixture
def tmux(cairn_env: dict[str, str]) -> Iterator[Tmux]:
    env = {**cairn_env, "TERM": "xterm-256color"}
    env.pop("TMUX", None)  # never attach to a tmux the tests themselves run in
    session = Tmux(env)
    yield session
    session.kill()


def start_cairn(tmux: Tmux, project: Path, status: Path, *args: str) -> None:
    """``cairn *args`` in the window, its exit code written to ``status`` when it ends."""
    # The shell records cairn's exit code (tmux's own pane_dead_status can lag behind).
    command = " ".join(f'"{part}"' for part in (CAIRN, *args))
    tmux.start(["sh", "-c", f'{command}; echo $? > "{status}"'], project)
    wait_until(lambda: "Type a message" in tmux.screen(), "the prompt box", tmux.screen)


def quit_cairn(tmux: Tmux, status: Path) -> str:
    """Ctrl+C twice; cairn's exit code."""
    tmux.keys("C-c")
    tmux.keys("C-c")
    wait_until(lambda: status.exists() and status.read_text().strip() != "", "cairn to exit",
               tmux.screen)
    return status.read_text().strip()


def test_tui_answers_a_typed_prompt_and_quits_cleanly(
    tmux: Tmux, scripted_server: ScriptedServer, project: Path, tmp_path: Path
):
    scripted_server.enqueue(reply("The capital of France is Paris."), purpose="main")
    status = tmp_path / "exit-status"
    start_cairn(tmux, project, status)

    tmux.keys("-l", "what is the capital of France?")
    tmux.keys("Enter")
    wait_until(lambda: "capital of France is Paris" in tmux.screen(), "the answer", tmux.screen)

    screen = tmux.screen()
    assert "› what is the capital of France?" in screen
    assert "scripted-model" in screen
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "what is the capital of France?"

    assert quit_cairn(tmux, status) == "0"
    assert "Traceback" not in tmux.screen()


def test_a_prompt_on_the_command_line_opens_the_ui_and_sends_it(
    tmux: Tmux, scripted_server: ScriptedServer, project: Path, tmp_path: Path
):
    """Regression: `cairn "fix the bug"` (how `claude "query"` starts) failed with "No such
    command 'fix the bug'"; it opens the UI with that as the first prompt."""
    scripted_server.enqueue(reply("The capital of France is Paris."), purpose="main")
    status = tmp_path / "exit-status"
    start_cairn(tmux, project, status, "what is the capital of France?", "--model", "other-model")

    wait_until(lambda: "capital of France is Paris" in tmux.screen(), "the answer", tmux.screen)
    assert "› what is the capital of France?" in tmux.screen()
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "what is the capital of France?"
    assert request.model == "other-model"
    assert quit_cairn(tmux, status) == "0"


def test_quitting_after_a_turn_says_how_to_come_back(
    tmux: Tmux, scripted_server: ScriptedServer, project: Path, tmp_path: Path
):
    """A new user who quits was not told how to get back to the conversation."""
    scripted_server.enqueue(reply("Noted."), purpose="main")
    status = tmp_path / "exit-status"
    start_cairn(tmux, project, status)
    tmux.keys("-l", "remember the plan")
    tmux.keys("Enter")
    wait_until(lambda: "Noted." in tmux.screen(), "the answer", tmux.screen)
    [request] = scripted_server.requests_for("main")

    assert quit_cairn(tmux, status) == "0"
    printed = " ".join(tmux.printed().split())
    assert f"cairn --resume {request.session_id}" in printed
    assert "cairn --continue" in printed


def test_quitting_an_empty_session_says_nothing_about_resuming(
    tmux: Tmux, scripted_server: ScriptedServer, project: Path, tmp_path: Path
):
    status = tmp_path / "exit-status"
    start_cairn(tmux, project, status)

    assert quit_cairn(tmux, status) == "0"
    assert "--resume" not in tmux.printed()


def test_bursts_of_keys_arrive_in_order_in_a_real_terminal(
    tmux: Tmux, scripted_server: ScriptedServer, project: Path
):
    """Regression: `/help`+Enter sent at once became `/helpelp`; `line one`, Ctrl+J, `line two`
    became `line oneline two` (Enter and Ctrl+J were applied out of order)."""
    scripted_server.enqueue(reply("Got both lines."), purpose="main")
    tmux.start([str(CAIRN)], project)
    wait_until(lambda: "Type a message" in tmux.screen(), "the prompt box", tmux.screen)

    tmux.keys("-l", "/h")
    wait_until(lambda: "List the slash commands" in tmux.screen(), "the completions", tmux.screen)
    tmux.keys("elp", "Enter")  # one write: the menu is still the one computed for "/h"
    wait_until(lambda: "Keys: Enter sends" in tmux.screen(), "the help text", tmux.screen)
    assert "Unknown command" not in tmux.screen()

    tmux.keys("line one", "C-j", "line two", "Enter")
    wait_until(lambda: "Got both lines." in tmux.screen(), "the answer", tmux.screen)
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "line one\nline two"
    tmux.keys("C-c")
    tmux.keys("C-c")


def test_continue_without_an_earlier_session_opens_a_new_one_and_says_so(
    tmux: Tmux, scripted_server: ScriptedServer, project: Path, tmp_path: Path
):
    """#16: the terminal UI and `cairn -p` agree on `--continue` with nothing to continue."""
    scripted_server.enqueue(reply("A fresh session answers."), purpose="main")
    status = tmp_path / "exit-status"
    start_cairn(tmux, project, status, "--continue")

    # The notice follows the first frame (the prompt box) on a busy machine: wait for it.
    notice = "No earlier session to continue in this project"
    wait_until(lambda: notice in tmux.screen(), "the notice", tmux.screen)
    tmux.keys("-l", "hello")
    tmux.keys("Enter")
    wait_until(lambda: "A fresh session answers." in tmux.screen(), "the answer", tmux.screen)
    assert quit_cairn(tmux, status) == "0"


def test_declining_trust_says_what_the_session_goes_without(
    tmux: Tmux, scripted_server: ScriptedServer, project: Path, tmp_path: Path
):
    """Issue #30: after "Don't trust" the session must say what it goes without and how to
    trust the folder later (pinned in a real terminal: the question, then the session)."""
    commands = project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "deploy.md").write_text("---\nallowed-tools: Bash(./deploy.sh)\n---\nDeploy.\n")
    status = tmp_path / "exit-status"
    command = f'"{CAIRN}"; echo $? > "{status}"'
    tmux.start(["sh", "-c", command], project)
    wait_until(lambda: "Do you trust this folder?" in tmux.screen(), "the question", tmux.screen)

    tmux.keys("2")

    def unwrapped() -> str:  # the notice wraps where the folder's path ends
        return " ".join(tmux.screen().split())

    notice = "is not a trusted folder: its project settings are not used (1 tool grant)"
    wait_until(lambda: notice in unwrapped(), "the notice", tmux.screen)
    assert "Review them (.claude/commands/deploy.md), then trust it with `cairn trust`" in (
        unwrapped()
    )
    assert quit_cairn(tmux, status) == "0"
