"""The garbage collector during a ``cairn`` process's start-up: rarely run, then frozen.

A start-up creates about 27,000 objects that live as long as the process (modules, classes,
functions, settings); with the default threshold the collector runs about 80 times while they are
made and walks them each time, about 4 % of the instructions of a ``cairn -p`` with one answer.
:func:`pause_collection` (first thing in :func:`cairn.cli.main.run`) raises the threshold so the
collector waits for 50,000 new objects; :func:`startup_done` (once the front end's runtime is
open: :func:`cairn.session.startup.open_runtime`; ``cairn --acp`` once its SDK is imported;
before ``cairn serve`` starts) moves everything alive into the permanent generation
(:func:`gc.freeze`: never walked again, the few hundred cyclic leftovers of the imports are
kept, not freed) and puts the default threshold back. A command that never calls it (``cairn
memory ...``, ``cairn --help``) keeps a collector that runs every 50,000 objects, which still
bounds what cycles can hold.

:func:`exit_now` ends such a process without the interpreter's teardown. The ``cairn`` program
(:func:`cairn.cli.main.run`) and ``cairn -p``'s extract worker (``cairn.session.extract_worker``)
use all three.
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["exit_now", "pause_collection", "startup_done"]

STARTUP_THRESHOLD = 50_000  # new container objects between collections while starting
_paused: tuple[int, ...] | None = None  # the thresholds to put back


def pause_collection() -> None:
    """Collect rarely until :func:`startup_done` (a no-op when already paused)."""
    global _paused
    if _paused is None:
        _paused = gc.get_threshold()
        gc.set_threshold(STARTUP_THRESHOLD, *_paused[1:])


def startup_done() -> None:
    """Freeze what the start-up made and collect as usual again (a no-op unless paused)."""
    global _paused
    if _paused is not None:
        gc.freeze()
        gc.set_threshold(*_paused)
        _paused = None


def exit_now(code: object) -> None:
    """Exit with ``code`` (an ``int`` or ``None``) without the interpreter's teardown, when
    nothing can be lost; otherwise return (the caller exits as usual).

    The teardown frees every module and object one by one: about 8 % of the instructions of a
    ``cairn -p`` with one answer (56 M of 650 M), more than most of its own work. It is skipped
    only when the main thread is the last one (no thread to join, as the interpreter would), and
    after running what the interpreter would run first: the ``atexit`` callbacks (the debug
    log's and logging's handlers, MCP children) and a flush of stdout and
    stderr. A flush that fails (a closed pipe) returns, and the usual exit reports it as before.
    Objects left to a finalizer are not finalized: cairn closes its files and processes itself
    (writes are atomic, the debug log is line-buffered).
    """
    import atexit
    import threading

    if not (code is None or isinstance(code, int)) or threading.active_count() != 1:
        return
    atexit._run_exitfuncs()
    if threading.active_count() != 1:  # an atexit callback started a thread
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code or 0)
