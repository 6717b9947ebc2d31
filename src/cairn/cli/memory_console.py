"""How ``cairn memory``'s commands talk: the console, known failures as one-line messages
with a nonzero exit code, and the memory manager of the current folder (``--tenant``'s)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console

from cairn.config.loader import NoAuthError, SettingsError, load_settings, resolve_endpoint
from cairn.config.paths import project_root
from cairn.config.settings import Settings
from cairn.exit_codes import ExitCode
from cairn.memory.document import MemoryDoc
from cairn.memory.manager import MemoryManager
from cairn.memory.recall.render import age_text, memory_age_days
from cairn.memory.store.backend import MemoryBackendError
from cairn.memory.store.transfer import TransferError

if TYPE_CHECKING:
    from cairn.llm.types import Provider

__all__ = ["age", "fail", "manager", "out", "provider", "run", "settings", "tenant", "use_tenant"]

_tenant: list[str | None] = [None]  # --tenant: a `cairn serve --tenant-header` tenant's memory


def use_tenant(name: str | None) -> None:
    _tenant[0] = name


def tenant() -> str | None:
    return _tenant[0]


def out() -> Console:
    # soft_wrap: paths and messages stay on one line, so they can be copied whole.
    return Console(highlight=False, soft_wrap=True)


def fail(message: str, code: int = ExitCode.ERROR) -> NoReturn:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print("[red]error:[/red] ", end="")
    err.print(message, markup=False)
    raise typer.Exit(code)


@contextmanager
def errors_as_messages() -> Iterator[None]:
    """Known failures become one-line messages with a nonzero exit code, never tracebacks."""
    try:
        yield
    except typer.Exit:
        raise
    except SettingsError as exc:
        fail(str(exc), ExitCode.CONFIG)
    except (TransferError, MemoryBackendError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or 'memory'}: {exc.strerror or exc}")
    except Exception as exc:
        fail(f"{type(exc).__name__}: {exc}")


def settings(cwd: Path) -> Settings:
    """The settings of ``cwd``, their warnings (unknown keys, ...) printed on stderr."""
    loaded = load_settings(cwd)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for warning in loaded.warnings:
        err.print("[yellow]warning:[/yellow] ", end="")
        err.print(warning, markup=False)
    return loaded.settings


def manager() -> MemoryManager:
    cwd = Path.cwd()
    manager = MemoryManager(project_root(cwd), settings=settings(cwd), tenant=_tenant[0])
    if manager.backend_error:  # a command must not quietly act on the wrong memory
        manager.close()
        fail(manager.backend_error)
    return manager


def provider(manager: MemoryManager) -> Provider | None:
    """The configured model endpoint, or None when none is configured."""
    try:
        endpoint = resolve_endpoint(manager.settings)
    except NoAuthError:
        return None
    from cairn.llm.factory import create_provider  # httpx: only for commands that ask the model

    return create_provider(endpoint, manager.settings)


def run(command: Callable[[], None]) -> None:
    with errors_as_messages():
        command()


def age(manager: MemoryManager, doc: MemoryDoc) -> str:
    return age_text(memory_age_days(doc.mtime, manager.clock()))
