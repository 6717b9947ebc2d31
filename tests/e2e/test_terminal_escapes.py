"""What a model, a tool or a project file sends never drives the terminal (#24): control
sequences and bidi overrides reach a terminal as visible escapes (real ``cairn -p`` processes,
a real pseudo-terminal)."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

from cairn.testing import ScriptedServer, reply, tool_call

from .conftest import CAIRN, RunCairn

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: write `rm -rf ~` to the clipboard
CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
CSI = "\x9b31m"  # the C1 form of an escape sequence
BIDI = "\u202e"  # right-to-left override
HOSTILE = f"Done.{CLIPBOARD}{CLEAR}{CSI} list{BIDI}txt.exe\tend\n"
VISIBLE = "Done.\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\x1b[H\\x9b31m list\\u202etxt.exe\tend\n"
RAW_BYTES = ("\x1b", "\x07", "\x9b", BIDI)


def run_on_terminal(env: dict[str, str], cwd: Path, *args: str) -> tuple[str, str]:
    """``cairn *args`` with its stdout on a pseudo-terminal: what it wrote there, and stderr."""
    main, child = os.openpty()
    process = subprocess.Popen(
        [*CAIRN, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=child,
        stderr=subprocess.PIPE,
    )
    os.close(child)
    shown = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other end closed: the process is done writing
                break
            if not chunk:
                break
            shown += chunk
        elif process.poll() is not None:
            break
    os.close(main)
    assert process.stderr is not None
    errors = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(30) == 0, errors
    return shown.decode().replace("\r\n", "\n"), errors


def test_a_models_control_sequences_reach_a_terminal_as_visible_escapes(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    """#24 Low: "terminal escapes and bidi overrides from a model ... reach the terminal
    unescaped (`cairn -p` output with OSC 52 clipboard writes and screen clears)"."""
    scripted_server.enqueue(reply(chunks=[HOSTILE[:9], HOSTILE[9:]]), purpose="main")

    shown, _ = run_on_terminal(cairn_env, project, "-p", "hi")

    assert shown == VISIBLE
    assert not any(raw in shown for raw in RAW_BYTES)


def test_piped_text_output_is_the_models_text_unchanged(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Piped, `cairn -p` writes what the model wrote (a program reads it; docs/headless.md)."""
    scripted_server.enqueue(reply(HOSTILE), purpose="main")

    done = run_cairn("-p", "hi")

    assert done.returncode == 0, done.stderr
    assert done.stdout == HOSTILE


def test_denial_lines_on_stderr_show_a_commands_escapes(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """#24 Low: denial lines carried a model's control sequences to the terminal."""
    command = f"touch {CLEAR}hidden{BIDI}gpj.sh"
    scripted_server.enqueue(tool_call("run_shell_command", {"command": command}), purpose="main")
    scripted_server.enqueue(reply("ok"), purpose="main")

    done = run_cairn("-p", "run it")

    assert done.returncode == 0, done.stderr
    [denial] = [line for line in done.stderr.splitlines() if line.startswith("Denied ")]
    assert denial.startswith("Denied touch \\x1b[2J\\x1b[Hhidden\\u202egpj.sh: ")
    assert not any(raw in done.stderr for raw in RAW_BYTES)


def test_json_output_escapes_c1_controls_and_bidi_overrides_and_decodes_the_same(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """JSON escapes C0 controls itself; C1 controls and bidi overrides, which JSON may carry
    raw, are written as \\u escapes too, so the output is safe on a terminal and decodes to
    exactly the model's text."""
    scripted_server.enqueue(reply(HOSTILE), purpose="main")

    done = run_cairn("-p", "hi", "-o", "json")

    assert done.returncode == 0, done.stderr
    assert not any(raw in done.stdout for raw in RAW_BYTES)
    assert "\\u009b" in done.stdout and "\\u202e" in done.stdout
    [result] = [m for m in json.loads(done.stdout) if m["type"] == "result"]
    assert result["result"] == HOSTILE


def run_ui_on_terminal(env: dict[str, str], cwd: Path, *args: str, until: bytes) -> bytes:
    """The terminal UI (``cairn *args``) on a 120x40 pseudo-terminal: every byte it wrote until
    ``until`` appeared, then Ctrl+C twice to quit."""
    main, child = os.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(
        [*CAIRN, *args],
        cwd=cwd,
        env={**env, "TERM": "xterm-256color"},
        stdin=child,
        stdout=child,
        stderr=child,
        start_new_session=True,
    )
    os.close(child)
    written = b""
    deadline = time.monotonic() + 60
    try:
        while until not in written:
            assert time.monotonic() < deadline, written[-2000:]
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                written += os.read(main, 65536)
        for _ in range(2):
            os.write(main, b"\x03")
            time.sleep(0.2)  # two key presses apart, not a wait for a condition
        while process.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    written += os.read(main, 65536)
                except OSError:
                    break
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        os.close(main)
    return written


def test_the_terminal_ui_shows_a_models_control_sequences_as_escapes(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    """#24 Low: the terminal UI wrote a model's OSC 52 clipboard write, C1 controls and bidi
    overrides to the terminal as they came."""
    scripted_server.enqueue(reply(HOSTILE), purpose="main")

    written = run_ui_on_terminal(cairn_env, project, "say it", until=b"txt.exe")

    assert b"\x1b]52;c;cm0g" not in written  # the clipboard write never reaches the terminal
    assert BIDI.encode() not in written and CSI.encode() not in written
    assert b"Done.\\x1b]52;c;cm0gLXJmIH4=\\x07" in written  # shown, as escapes
