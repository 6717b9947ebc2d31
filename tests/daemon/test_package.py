"""``cairn.daemon`` stays import-light: Starlette and uvicorn load only when the daemon runs.

The session runtime (``cairn.session.runtime`` and the session it builds) loads only after the
daemon listens; ``cairn.session.startup``, which checks the settings first, may load before.
Pydantic does not load at all: the request bodies are read by the settings' own strict reader.
"""

from __future__ import annotations

import subprocess
import sys

WATCHED = ("starlette", "uvicorn", "acp", "textual", "cairn.session.runtime", "pydantic")


def imported_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {WATCHED!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_importing_the_package_loads_no_server_code() -> None:
    assert imported_after("import cairn.daemon") == []


def test_the_cli_loads_no_server_code_until_serve_runs() -> None:
    assert imported_after("import cairn.cli.main") == []


def test_the_server_module_listens_without_the_session_runtime() -> None:
    assert imported_after("import cairn.daemon.server") == ["uvicorn"]


def test_the_routes_and_request_bodies_load_no_pydantic() -> None:
    """Importing pydantic and building the bodies' five models was about a third of a
    ``cairn serve``'s start-up CPU (benchmarks/README.md, issue 25)."""
    loaded = imported_after("import cairn.daemon.routes")

    assert "pydantic" not in loaded
    assert "cairn.session.runtime" in loaded  # the probe reached the session code


def test_the_server_module_loads_uvicorn_without_its_command_line() -> None:
    """uvicorn's ``__init__`` imports its command line (click, the reload and multiprocess
    supervisors): about 14 ms of a ``cairn serve`` start (benchmarks/README.md, issue 25)."""
    probe = (
        "import sys, cairn.daemon.server\n"
        "print(sorted(m for m in ('uvicorn.main', 'click', 'multiprocessing') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"


def test_uvicorn_names_still_resolve_after_the_server_module() -> None:
    """Every name of the ``uvicorn`` package works: its own ``from uvicorn import Config`` gets
    the class the daemon serves with, and ``uvicorn.run`` runs the package's ``__init__``."""
    probe = (
        "import cairn.daemon.server as s, uvicorn\n"
        "from uvicorn import Config, Server\n"
        "from uvicorn.lifespan.on import LifespanOn\n"
        "assert Config is s.Config and Server is s.Server\n"
        "assert callable(uvicorn.run) and uvicorn.__version__\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "ok"
