"""How ``cairn memory``'s commands talk: the console, known failures as one-line messages
with a nonzero exit code, and the memory manager of the current folder (``--tenant``'s).

Neither typer nor rich is imported here: ``cairn memory search|show|forget|list`` run without
typer (:mod:`cairn.cli.memory_argv`), and rich is loaded only for a terminal, a table, or a text
that rich would print differently from the text itself (:func:`prints_as_is`): into a pipe,
``show`` and ``list`` write their lines directly, byte for byte what rich would write.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from cairn.config.loader import NoAuthError, SettingsError, load_settings, resolve_endpoint
from cairn.config.paths import project_root
from cairn.config.settings import Settings
from cairn.exit_codes import ExitCode
from cairn.memory.document import MemoryDoc
from cairn.memory.manager import MemoryManager
from cairn.memory.recall.render import age_text, memory_age_days
from cairn.memory.store.backend import MemoryBackendError

if TYPE_CHECKING:
    from rich.console import Console

    from cairn.llm.types import Provider

__all__ = [
    "age",
    "close",
    "fail",
    "manager",
    "out",
    "prints_as_is",
    "provider",
    "run",
    "say",
    "settings",
    "tenant",
    "use_tenant",
]

_EMOJI_CODE = re.compile(r":\S*?:")  # rich replaces `:name:` emoji codes even with markup off
_TERMINAL_VARIABLES = ("FORCE_COLOR", "TTY_COMPATIBLE")  # rich treats a pipe as a terminal

_opened: list[MemoryManager] = []  # managers a command opened, closed by run() after it
_tenant: list[str | None] = [None]  # --tenant: a `cairn serve --tenant-header` tenant's memory


def use_tenant(name: str | None) -> None:
    _tenant[0] = name


def tenant() -> str | None:
    return _tenant[0]


def out(*, stderr: bool = False) -> Console:
    from rich.console import Console

    # soft_wrap: paths and messages stay on one line, so they can be copied whole.
    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def prints_as_is(stream: TextIO, text: str) -> bool:
    """Whether :func:`out`'s ``print(text, markup=False)`` writes ``text`` to ``stream`` as it
    is, plus the line end: not a terminal (no styles), and nothing rich would change (emoji
    codes, control characters and tabs, other spaces than ' ', trailing whitespace, which rich
    trims past the width, or a character the stream's encoding may not hold)."""
    if any(os.environ.get(name) is not None for name in _TERMINAL_VARIABLES):
        return False
    isatty = getattr(stream, "isatty", None)
    if isatty is None or isatty():
        return False
    encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
    if not text.isascii() and encoding != "utf8":
        return False
    return not _EMOJI_CODE.search(text) and all(
        line.isprintable() and line == line.rstrip() for line in text.split("\n")
    )


def say(text: str = "", *, style: str | None = None, stderr: bool = False) -> None:
    """``out().print(text, style=style, markup=False)``, written directly where that is
    ``text`` itself (:func:`prints_as_is`)."""
    stream = sys.stderr if stderr else sys.stdout
    if prints_as_is(stream, text):
        stream.write(text + "\n")
        stream.flush()
    else:
        out(stderr=stderr).print(text, style=style, markup=False)


def _labelled(label: str, color: str, message: str) -> None:
    """``label: message`` on stderr, the label in ``color`` on a terminal."""
    if prints_as_is(sys.stderr, message):
        sys.stderr.write(f"{label}: {message}\n")
        sys.stderr.flush()
        return
    err = out(stderr=True)
    err.print(f"[{color}]{label}:[/{color}] ", end="")
    err.print(message, markup=False)


def fail(message: str, code: int = ExitCode.ERROR) -> NoReturn:
    _labelled("error", "red", message)
    raise SystemExit(code)


class _NotRaised(Exception):
    """What :func:`_transfer_error` names before the transfer module is loaded."""


def _transfer_error() -> type[Exception]:
    """``TransferError`` when export, import or migrate loaded its module (they alone raise
    it), else an exception nothing raises: ``search`` and ``show`` do not load ``shutil``."""
    module = sys.modules.get("cairn.memory.store.transfer")
    return _NotRaised if module is None else module.TransferError


@contextmanager
def errors_as_messages() -> Iterator[None]:
    """Known failures become one-line messages with a nonzero exit code, never tracebacks."""
    try:
        yield
    except SettingsError as exc:
        fail(str(exc), ExitCode.CONFIG)
    except MemoryBackendError as exc:
        fail(str(exc))
    except _transfer_error() as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or 'memory'}: {exc.strerror or exc}")
    except Exception as exc:
        fail(f"{type(exc).__name__}: {exc}")


def settings(cwd: Path) -> Settings:
    """The settings of ``cwd``, their warnings (unknown keys, ...) printed on stderr."""
    loaded = load_settings(cwd)
    for warning in loaded.warnings:
        _labelled("warning", "yellow", warning)
    return loaded.settings


def manager(*, check_postings: bool = True, trust_saved: bool = False) -> MemoryManager:
    """The memory of the current folder; ``check_postings=False`` for a command that reads no
    posting list it does not check as it reads it (see :class:`MemoryStore`): the saved lists
    are then not checked as a whole at open; ``trust_saved=True`` for a command that checks
    each memory it serves (the saved index checked by its folders, not by a stat a file)."""
    cwd = Path.cwd()
    manager = MemoryManager(
        project_root(cwd),
        settings=settings(cwd),
        tenant=_tenant[0],
        check_postings=check_postings,
        trust_saved=trust_saved,
    )
    if manager.backend_error:  # a command must not quietly act on the wrong memory
        manager.close()
        fail(manager.backend_error)
    _opened.append(manager)
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
    """``command`` with its known failures as messages; every memory manager it opened is
    closed after it (even when it fails): the memories it read again, changed on disk, are
    saved to the index for the next command, and the backend's connections closed."""
    try:
        with errors_as_messages():
            command()
    finally:
        _close_opened()


def close(manager: MemoryManager) -> None:
    """Close ``manager`` now (before the command's last output), not again after it."""
    if manager in _opened:
        _opened.remove(manager)
    manager.close()


def _close_opened() -> None:
    while _opened:
        manager = _opened.pop()
        try:
            manager.close()
        except Exception as exc:  # the command's own outcome stands; the next one reads again
            _labelled("warning", "yellow", f"memory index not saved: {exc}")


def age(manager: MemoryManager, doc: MemoryDoc) -> str:
    return age_text(memory_age_days(doc.mtime, manager.clock()))
