"""``cairn demo``: the scripted tour runs end to end, memory included."""

from __future__ import annotations

import io

from rich.console import Console

from cairn.demo import run_demo


def test_the_demo_extracts_a_memory_in_one_session_and_recalls_it_in_the_next() -> None:
    out = io.StringIO()

    assert run_demo(console=Console(file=out, width=200, color_system=None)) == 0

    text = out.getvalue()
    assert "+ project memory: feedback/testing-with-pytest.md (extract)" in text
    assert "recalled into this session: Tests use pytest" in text
    assert "Wrote `test_greet.py` with two pytest tests" in text
