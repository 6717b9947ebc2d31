"""The public surface of ``cairn.tools``."""

from __future__ import annotations

import subprocess
import sys

import cairn.tools


def test_every_exported_name_exists() -> None:
    for name in cairn.tools.__all__:
        assert hasattr(cairn.tools, name), name


def test_exports_are_unique() -> None:
    assert len(cairn.tools.__all__) == len(set(cairn.tools.__all__))


def test_importing_tools_does_not_load_heavy_modules() -> None:
    code = (
        "import sys, cairn.tools; "
        "print(sorted(m for m in ('textual', 'starlette', 'uvicorn', 'acp', 'httpx', 'pydantic') "
        "if m in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()

    assert loaded == "[]"
