"""Telemetry events: named records of what a feature did, never what the user wrote.

Events go to the debug log (tag ``TELEMETRY``), to in-process subscribers (tests, the daemon) and,
when ``telemetry.outfile`` or ``CAIRN_TELEMETRY_FILE`` names a file, to that file as JSON lines.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from cairn.debug_log import get_logger

__all__ = ["configure", "emit", "subscribe"]

Subscriber = Callable[[str, dict[str, Any]], None]
_subscribers: list[Subscriber] = []
_outfile: str | None = None
_enabled = True
_lock = threading.Lock()
_log = get_logger("TELEMETRY")


def configure(*, enabled: bool = True, outfile: str | None = None) -> None:
    global _enabled, _outfile
    _enabled = enabled
    _outfile = os.environ.get("CAIRN_TELEMETRY_FILE") or outfile


def subscribe(subscriber: Subscriber) -> Callable[[], None]:
    _subscribers.append(subscriber)
    return lambda: _subscribers.remove(subscriber) if subscriber in _subscribers else None


def emit(name: str, **attributes: Any) -> None:
    """Record one event. Never raises."""
    for subscriber in list(_subscribers):
        try:
            subscriber(name, dict(attributes))
        except Exception:  # noqa: S112 - a broken subscriber must not break a turn
            continue
    if not _enabled:
        return
    record = {"event": name, "time": time.time(), **attributes}
    line = json.dumps(record, default=str, ensure_ascii=False)
    _log.info(line)
    target = _outfile or os.environ.get("CAIRN_TELEMETRY_FILE")
    if target:
        try:
            with _lock, open(target, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError:
            pass
