"""The JSON state files of a project (``meta.json``, ``extract-cursor.json``): lenient reads.

A state file that is not a JSON object is never a reason to fail or to lose it: it is moved
aside to ``<name>.corrupt-<time>`` with a warning and the caller starts from defaults.
Writes are atomic (:func:`cairn.fsutil.atomic_write_json`).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from cairn.debug_log import get_logger

__all__ = ["iso_time", "parse_iso_time", "read_state_object"]

_log = get_logger("MEMORY")


def iso_time(seconds: float) -> str:
    """``2025-06-15T12:00:00.000Z`` (UTC, milliseconds), as the reference writes times."""
    moment = _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_iso_time(value: Any) -> float | None:
    """Seconds since the epoch for an ISO 8601 time, or None when it is not one."""
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.timestamp()


def read_state_object(path: Path, *, now: float) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` when missing, unreadable or corrupt (kept aside)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as error:
        _log.warning(f"{path}: not readable ({error.strerror or error}); using defaults")
        return {}
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        _set_aside(path, now, f"not valid JSON ({error})")
        return {}
    if not isinstance(value, dict):
        _set_aside(path, now, "not a JSON object")
        return {}
    return value


def _set_aside(path: Path, now: float, reason: str) -> None:
    stamp = _dt.datetime.fromtimestamp(now, tz=_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    with contextlib.suppress(OSError):
        os.replace(path, target)
        _log.warning(f"{path}: {reason}; moved to {target.name} and starting from defaults")
        return
    _log.warning(f"{path}: {reason}; ignoring it")
