"""Add the cases of settings keys new to the schema to ``data/settings_cases.json``.

Run from the repository root: ``python -m tests.config.record_new_cases``. Every recorded case
keeps its recorded outcome (what the pydantic models made of it, until issue 32); a case the
recording lacks (a key added since) is recorded as the current reader reads it, in the order
:func:`~tests.config.settings_cases.cases` gives. Read the added lines before committing them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cairn.config.loader import settings_as_read
from cairn.config.settings import Settings

from .settings_cases import cases, outcome

DATA = Path(__file__).parent / "data" / "settings_cases.json"


def main() -> None:
    recorded: dict[str, list[dict[str, Any]]] = {}
    for entry in json.loads(DATA.read_text()):
        recorded.setdefault(json.dumps(entry["settings"], sort_keys=True), []).append(entry)
    entries, added = [], 0
    for case in cases(Settings):
        known = recorded.get(json.dumps(case, sort_keys=True))
        if known:
            entries.append(known.pop(0))
        else:
            added += 1
            entries.append({"outcome": outcome(settings_as_read, case), "settings": case})
    dropped = sum(len(left) for left in recorded.values())
    DATA.write_text("[\n" + ",\n".join(json.dumps(e, sort_keys=True) for e in entries) + "\n]\n")
    print(f"{len(entries)} cases: {added} added, {dropped} no longer in the schema dropped")


if __name__ == "__main__":
    main()
