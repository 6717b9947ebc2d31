"""Building hook settings and runners for tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cairn.config.settings import HooksSettings
from cairn.hooks import HookRunner

ScriptFactory = Callable[[str], str]  # body of a bash script -> command that runs it

TEST_PATH = "/usr/local/bin:/usr/bin:/bin"  # the only environment hooks get unless a test adds more


def hooks_settings(
    event: str, *groups: tuple[str, Sequence[str | dict[str, Any]]]
) -> HooksSettings:
    """``HooksSettings`` with ``(matcher, [command or hook dict, ...])`` groups for ``event``."""
    raw = [
        {
            "matcher": matcher,
            "hooks": [
                {"type": "command", "command": c} if isinstance(c, str) else c for c in commands
            ],
        }
        for matcher, commands in groups
    ]
    return HooksSettings.model_validate({event: raw})


def make_runner(tmp_path: Path, settings: HooksSettings, **kwargs: Any) -> HookRunner:
    kwargs.setdefault("session_id", "sess-1")
    kwargs.setdefault("environ", {"PATH": TEST_PATH})
    return HookRunner(settings, cwd=tmp_path, **kwargs)
