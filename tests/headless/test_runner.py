"""The headless front end's import footprint (its behaviour is in tests/e2e/test_headless.py)."""

import subprocess
import sys

HEAVY = ("acp", "textual", "starlette", "uvicorn", "typer")


def test_the_headless_path_imports_no_front_end_library() -> None:
    """A `cairn -p` turn needs none of the ACP SDK, Textual, Starlette, uvicorn or typer."""
    probe = (
        "import sys\n"
        "import cairn.cli.main, cairn.headless.runner, cairn.session.session\n"
        "import cairn.llm.openai, cairn.memory.manager, cairn.memory.recall.lifecycle\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
