"""No module of ``src/cairn`` grows past what a reader takes in at once: 700 lines (issue 25
split the ones that had: the session into its turn and satellites, the memory manager and its
scheduler, the settings by section, ...). A module that reaches it is split by concept."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cairn"
MAX_MODULE_LINES = 700  # a module's lines, docstrings and comments included
MAX_SESSION_LINES = 500  # session.py: identity, collaborators and the front-end API only


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _oversized() -> dict[str, int]:
    return {
        path.relative_to(SRC).as_posix(): _lines(path)
        for path in sorted(SRC.rglob("*.py"))
        if _lines(path) > MAX_MODULE_LINES
    }


def test_no_module_is_over_700_lines() -> None:
    assert _oversized() == {}


def test_the_session_module_holds_no_more_than_the_session() -> None:
    assert _lines(SRC / "session" / "session.py") <= MAX_SESSION_LINES
