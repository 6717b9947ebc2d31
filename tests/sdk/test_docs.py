"""The Python examples in docs/sdk.md, run as written against a real daemon."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply

from .conftest import Daemon

DOC = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"
_BLOCK = re.compile(r"<!-- docs-test: run -->\n```python\n(.*?)```", re.DOTALL)
DOC_URL = "http://127.0.0.1:4170"
EXAMPLES = _BLOCK.findall(DOC.read_text())


def test_the_doc_has_runnable_examples() -> None:
    assert len(EXAMPLES) == 2
    assert all(DOC_URL in example for example in EXAMPLES)


@pytest.mark.parametrize("example", EXAMPLES, ids=["async", "sync"])
async def test_a_documented_example_runs(
    daemon: Daemon, scripted_server: ScriptedServer, example: str
) -> None:
    scripted_server.enqueue(reply("Answer from the model."), purpose="main")
    code = example.replace(DOC_URL, daemon.url)

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)

    assert process.returncode == 0, err.decode()
    assert out.decode().splitlines()[0] == "Answer from the model."
