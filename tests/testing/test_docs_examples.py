"""The runnable examples in docs/testing.md (blocks marked `<!-- docs-test: run -->`) run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.testing.script import load_script

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
RUNNABLE = re.compile(r"<!-- docs-test: run -->\n```python\n(.*?)```", re.DOTALL)
JSON_BLOCK = re.compile(r"```json\n(.*?)```", re.DOTALL)


def runnable_examples() -> list[str]:
    return RUNNABLE.findall(DOC.read_text(encoding="utf-8"))


def test_the_page_has_runnable_examples() -> None:
    assert len(runnable_examples()) >= 2


@pytest.mark.parametrize("index", range(len(runnable_examples())))
def test_the_example_runs(index: int) -> None:
    code = runnable_examples()[index]

    finished = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )

    assert finished.returncode == 0, finished.stderr


def test_the_example_script_loads(tmp_path: Path) -> None:
    [example] = JSON_BLOCK.findall(DOC.read_text(encoding="utf-8"))
    script = tmp_path / "script.json"
    script.write_text(example)

    queued, default = load_script(script)

    assert [q.purpose for q in queued] == [None, None, "recap"]
    assert default is not None
    assert json.loads(example)["default"] == {"text": default.text}
