"""pytest fixtures for testing against the scripted model server.

Installing cairn registers this module as the ``cairn`` pytest plugin, so the fixtures are
available in every test run without configuration.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from cairn.testing.server import ScriptedServer

__all__ = [
    "TEST_API_KEY",
    "TEST_MODEL",
    "anthropic_env",
    "cairn_env",
    "isolated_env",
    "scripted_server",
]

TEST_API_KEY = "test-key"
TEST_MODEL = "scripted-model"
LOOPBACK_HOSTS = "127.0.0.1,localhost,::1"
# Inherited variables that would make a test depend on the machine it runs on.
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy")
_KEPT_CAIRN_VARIABLES = ("CAIRN_DEBUG_LOG_FILE",)


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A started :class:`ScriptedServer`, stopped after the test."""
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def cairn_env(scripted_server: ScriptedServer, tmp_path: Path) -> dict[str, str]:
    """Environment variables for running ``cairn`` in isolation against ``scripted_server``."""
    return isolated_env(scripted_server.base_url, tmp_path)


@pytest.fixture
def anthropic_env(scripted_server: ScriptedServer, tmp_path: Path) -> dict[str, str]:
    """:func:`cairn_env`, but cairn talks to the server over the Anthropic Messages wire."""
    return isolated_env(scripted_server.base_url, tmp_path, wire="anthropic")


def isolated_env(
    base_url: str,
    root: Path,
    environ: Mapping[str, str] | None = None,
    *,
    wire: str = "openai",
) -> dict[str, str]:
    """A copy of ``environ`` (default: ``os.environ``) pointing cairn at ``base_url``.

    ``HOME`` and ``CAIRN_HOME`` are fresh folders under ``root``; proxies are removed and
    ``NO_PROXY`` covers loopback; inherited ``OPENAI_*``, ``ANTHROPIC_*`` and ``CAIRN_*``
    variables are dropped (except ``CAIRN_DEBUG_LOG_FILE``). ``wire="anthropic"`` sets the
    ``ANTHROPIC_*`` variables instead of the ``OPENAI_*`` ones.
    """
    env = {
        name: value
        for name, value in (os.environ if environ is None else environ).items()
        if not _is_dropped(name)
    }
    home = root / "home"
    cairn_home = root / "cairn-home"
    home.mkdir(parents=True, exist_ok=True)
    cairn_home.mkdir(parents=True, exist_ok=True)
    prefix = "ANTHROPIC" if wire == "anthropic" else "OPENAI"
    env.update(
        {
            "HOME": str(home),
            "CAIRN_HOME": str(cairn_home),
            f"{prefix}_BASE_URL": base_url,
            f"{prefix}_API_KEY": TEST_API_KEY,
            f"{prefix}_MODEL": TEST_MODEL,
            "NO_PROXY": LOOPBACK_HOSTS,
            "no_proxy": LOOPBACK_HOSTS,
        }
    )
    return env


def _is_dropped(name: str) -> bool:
    if name.lower() in _PROXY_VARIABLES or name.lower() == "no_proxy":
        return True
    if name.startswith("CAIRN_"):
        return name not in _KEPT_CAIRN_VARIABLES
    return name.startswith(("OPENAI_", "ANTHROPIC_"))
