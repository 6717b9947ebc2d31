"""The curl examples in docs/daemon.md, run against a real `cairn serve`."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply

from .conftest import CAIRN
from .test_daemon import START_TIMEOUT, first_line

DOC = Path(__file__).resolve().parents[2] / "docs" / "daemon.md"
_BLOCK = re.compile(r"<!-- docs-test: (run|stream) -->\n```sh\n(.*?)```", re.DOTALL)
STREAM_SECONDS = 2  # a streaming example runs this long, then is stopped like Ctrl-C would
RECAP = "Reading the README to learn the project. Next: look at the install steps."

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(60),
    pytest.mark.skipif(not (shutil.which("curl") and shutil.which("jq")), reason="needs curl, jq"),
]


def script(tmp_path: Path) -> str:
    """One bash script running the marked blocks in order; stream blocks under a timeout."""
    lines = ["set -euo pipefail"]
    for index, (kind, body) in enumerate(_BLOCK.findall(DOC.read_text())):
        if kind == "run":
            lines.append(body)
            continue
        block = tmp_path / f"stream{index}.sh"
        block.write_text(body)
        lines.append(f"export SESSION; timeout {STREAM_SECONDS} bash {block} || [ $? -eq 124 ]")
    return "\n".join(lines)


def test_the_documented_curl_session_works(
    cairn_env: dict[str, str], project: Path, scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    scripted_server.enqueue(reply("The README explains how to install the tool."), purpose="main")
    scripted_server.enqueue(reply(f"<recap>{RECAP}</recap>"), purpose="recap")
    process = subprocess.Popen(
        [*CAIRN, "serve", "--port", "0"],
        cwd=project,
        env=cairn_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = first_line(process, START_TIMEOUT).split("listening on ")[1].split()[0]
        done = subprocess.run(
            ["bash", "-c", script(tmp_path)],
            env={**cairn_env, "CAIRN": url},
            capture_output=True,
            text=True,
            timeout=40,
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)
        assert process.stdout is not None
        process.stdout.close()

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert '{"status":"ok"}' in out
    assert '"session_recap"' in out
    assert '"promptId"' in out
    assert "event: turn_complete" in out
    assert "The README explains how to install the tool." in out
    assert f'"recap":"{RECAP}"' in out
    assert out.rstrip().endswith("204")
    assert len(_BLOCK.findall(DOC.read_text())) == 4
