"""Building a real runtime on the scripted model server for recap tests."""

from __future__ import annotations

from pathlib import Path

from cairn.config.loader import Endpoint
from cairn.config.settings import Settings
from cairn.session.runtime import Runtime
from cairn.testing import ScriptedServer
from cairn.testing.fixtures import TEST_API_KEY, TEST_MODEL

FAST_MODEL = "fast-scripted-model"


def make_runtime(
    server: ScriptedServer, workspace: Path, *, fast_model: str | None = None
) -> Runtime:
    settings = Settings()
    settings.memory.enable_managed_auto_memory = False  # no Recall/Extract requests in the script
    endpoint = Endpoint(server.base_url, TEST_API_KEY, TEST_MODEL, fast_model)
    return Runtime.from_endpoint(cwd=workspace, settings=settings, endpoint=endpoint)
