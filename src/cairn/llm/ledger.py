"""Token usage by purpose: what each kind of request cost, per session and per day.

Every request names the feature that pays for it (``X-Cairn-Purpose``: ``main``,
``recall-selector``, ``extract``, ``dream``, ``recap``, ``compress``, ``task-checkpoint``,
``subagent``, ``web-fetch`` ...). A :class:`UsageLedger` watches a provider (:meth:`watch`) and
adds up the usage each answer reports: per session in memory, and per day in
``$CAIRN_HOME/usage/<YYYY-MM-DD>.jsonl``, one line per answer, appended by every cairn process of
that home (one ``write`` of a short line each, so lines from two processes never interleave). A
damaged line is skipped with one warning. Usage is kept by purpose and model, so a price per
model (``model.prices``) gives the cost by purpose (:func:`by_purpose_dict`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from cairn.debug_log import get_logger
from cairn.vocabulary.usage import Usage

if TYPE_CHECKING:
    from cairn.llm.types import ModelRequest, Provider

__all__ = ["PURPOSE_ORDER", "UsageLedger", "UsageObserver", "UsageReports", "by_purpose_dict"]

# The order purposes are shown in: the conversation first, then memory, then the rest.
PURPOSE_ORDER: Final = (
    "main",
    "subagent",
    "recall-selector",
    "extract",
    "dream",
    "forget",
    "recap",
    "title",
    "compress",
    "task-checkpoint",
    "web-fetch",
    "hook",
)
MAX_DAY_FILE_BYTES: Final = 64 * 1024 * 1024  # a day file larger than this is not read
_log = get_logger("USAGE")
UsageObserver = Callable[["ModelRequest", Usage], None]  # an answer to a request used this


class UsageReports:
    """A provider's side of :meth:`UsageLedger.watch`: observers told of each answer's usage."""

    _usage_observers: tuple[UsageObserver, ...] = ()

    def on_usage(self, observer: UsageObserver) -> None:
        """Tell ``observer`` what every answer streamed from now on used."""
        self._usage_observers = (*self._usage_observers, observer)

    def report_usage(self, request: ModelRequest, usage: Usage) -> None:
        for observer in self._usage_observers:
            try:
                observer(request, usage)
            except Exception as exc:  # accounting never fails a request
                _log.warning(f"counting a request's usage failed: {exc!r}")


def _sorted(totals: Mapping[str, Any]) -> dict[str, Any]:
    rank = {purpose: index for index, purpose in enumerate(PURPOSE_ORDER)}
    return {k: totals[k] for k in sorted(totals, key=lambda p: (rank.get(p, len(rank)), p))}


ByModel = Mapping[str, Mapping[str, Usage]]  # purpose -> model -> usage
Pricer = Callable[[str, Usage], float | None]  # model, usage -> US dollars (None: not priced)


def by_purpose_dict(totals: ByModel, price: Pricer | None = None) -> dict[str, dict[str, Any]]:
    """``totals`` as JSON: ``{purpose: {input_tokens, output_tokens, ..., cost_usd?}}``;
    ``cost_usd`` when ``price`` knows every model the purpose used."""
    out: dict[str, dict[str, Any]] = {}
    for purpose, models in _sorted(totals).items():
        summed = Usage()
        costs = []
        for model, usage in models.items():
            summed.add(usage)
            costs.append(price(model, usage) if price is not None else None)
        entry: dict[str, Any] = summed.to_dict()
        if costs and all(cost is not None for cost in costs):
            entry["cost_usd"] = round(sum(c for c in costs if c is not None), 6)
        out[purpose] = entry
    return out


class UsageLedger:
    """Usage by purpose of the requests of the providers it watches."""

    def __init__(
        self, folder: Path | None = None, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.folder = folder  # None: per session only, nothing written
        self._clock = clock
        self._sessions: dict[str, dict[str, dict[str, Usage]]] = {}
        self._warned: set[Path] = set()
        self._last_day_file: tuple[_dt.date, Path] | None = None

    def watch(self, provider: Provider) -> None:
        """Count every answer ``provider`` streams from now on."""
        provider.on_usage(self.record)

    def record(self, request: ModelRequest, usage: Usage) -> None:
        """One answer to ``request`` used ``usage``. Never raises: accounting is a helper."""
        purpose = request.purpose or "main"
        if request.session_id:
            totals = self._sessions.setdefault(request.session_id, {})
            totals.setdefault(purpose, {}).setdefault(request.model, Usage()).add(usage)
        if self.folder is None:
            return
        line = {
            "at": round(self._clock(), 3),
            "session": request.session_id or "",
            "purpose": purpose,
            "model": request.model,
            **usage.to_dict(),
        }
        try:
            self._append(self._day_file(self.today()), json.dumps(line) + "\n")
        except OSError as exc:
            _log.warning(f"the day's usage could not be written: {exc!r}")

    def session(self, session_id: str) -> dict[str, Usage]:
        """What ``session_id``'s requests used in this process, by purpose."""
        return _summed(self.session_by_model(session_id))

    def session_by_model(self, session_id: str) -> dict[str, dict[str, Usage]]:
        """:meth:`session` by purpose and model."""
        totals = self._sessions.get(session_id, {})
        return _sorted({p: {m: _copy(u) for m, u in ms.items()} for p, ms in totals.items()})

    def day(self, day: _dt.date | None = None) -> dict[str, Usage]:
        """What every process of this home used on ``day`` (default: today, UTC), by purpose."""
        return _summed(self.day_by_model(day))

    def day_by_model(self, day: _dt.date | None = None) -> dict[str, dict[str, Usage]]:
        """:meth:`day` by purpose and model."""
        if self.folder is None:
            return {}
        path = self._day_file(day or self.today())
        try:
            if path.stat().st_size > MAX_DAY_FILE_BYTES:
                self._warn(path, f"{path} is larger than {MAX_DAY_FILE_BYTES} bytes; not read")
                return {}
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            self._warn(path, f"{path} could not be read: {exc!r}")
            return {}
        totals: dict[str, dict[str, Usage]] = {}
        damaged = 0
        for raw in text.splitlines():
            entry = _entry(raw)
            if entry is None:
                damaged += 1
                continue
            purpose, model, usage = entry
            totals.setdefault(purpose, {}).setdefault(model, Usage()).add(usage)
        if damaged:
            self._warn(path, f"{path}: {damaged} damaged line(s) skipped")
        return _sorted(totals)

    def today(self) -> _dt.date:
        """Today's date (UTC) by the ledger's clock: the day :meth:`day` reads by default."""
        return _dt.datetime.fromtimestamp(self._clock(), _dt.UTC).date()

    def _day_file(self, day: _dt.date) -> Path:
        assert self.folder is not None
        last = self._last_day_file
        if last is None or last[0] != day:  # one path a day, not one per answer
            last = self._last_day_file = (day, self.folder / f"{day.isoformat()}.jsonl")
        return last[1]

    def _append(self, path: Path, line: str) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:  # the first answer of this home: its folder is made once
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, flags, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)

    def _warn(self, path: Path, message: str) -> None:
        if path not in self._warned:
            self._warned.add(path)
            _log.warning(message)


def _copy(usage: Usage) -> Usage:
    total = Usage()
    total.add(usage)
    return total


def _summed(totals: ByModel) -> dict[str, Usage]:
    out: dict[str, Usage] = {}
    for purpose, models in totals.items():
        out[purpose] = Usage()
        for usage in models.values():
            out[purpose].add(usage)
    return out


def _entry(raw: str) -> tuple[str, str, Usage] | None:
    """One line of a day file, or ``None`` when it is damaged."""
    try:
        data: Any = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("purpose"), str):
        return None
    counts = []
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens"):
        value = data.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return None
        counts.append(value)
    written = data.get("cache_creation_input_tokens", 0)
    written = written if isinstance(written, int) and written >= 0 else 0
    usage = Usage(
        input_tokens=counts[0],
        output_tokens=counts[1],
        total_tokens=counts[0] + counts[1],
        cached_tokens=counts[2],
        cache_write_tokens=written,
    )
    model = data.get("model")
    return data["purpose"], model if isinstance(model, str) else "", usage
