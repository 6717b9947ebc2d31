"""meta.json: what Extract and Dream record, in the reference's shape."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.memory.background.meta import (
    last_dream_at,
    read_meta,
    record_dream,
    record_extraction,
    write_meta,
)
from cairn.memory.background.state_files import iso_time

T0 = 1_750_000_000.0


def test_an_extraction_is_recorded_with_its_topics(tmp_path: Path) -> None:
    record_extraction(tmp_path, session_id="s1", touched_topics=["feedback"], now=T0)

    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta == {
        "version": 1,
        "createdAt": iso_time(T0),
        "lastExtractionAt": iso_time(T0),
        "lastExtractionSessionId": "s1",
        "lastExtractionTouchedTopics": ["feedback"],
        "lastExtractionStatus": "updated",
        "updatedAt": iso_time(T0),
    }
    assert (tmp_path / "meta.json").read_text().endswith("}\n")


def test_a_dream_keeps_earlier_fields_and_unknown_keys(tmp_path: Path) -> None:
    write_meta(tmp_path, {"custom": 1}, now=T0)
    record_extraction(tmp_path, session_id="s1", touched_topics=[], now=T0 + 1)
    record_dream(tmp_path, session_id="s2", touched_topics=[], now=T0 + 2)

    meta = read_meta(tmp_path, now=T0)
    assert meta["custom"] == 1 and meta["createdAt"] == iso_time(T0)
    assert meta["lastExtractionStatus"] == "noop" and meta["lastDreamStatus"] == "noop"
    assert meta["lastDreamSessionId"] == "s2" and meta["recentSessionIdsSinceDream"] == []
    assert last_dream_at(meta) == T0 + 2


def test_a_corrupt_meta_is_replaced_and_kept_aside(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text("nope")

    record_dream(tmp_path, session_id="s", touched_topics=["user"], now=T0)

    assert read_meta(tmp_path, now=T0)["lastDreamStatus"] == "updated"
    assert len(list(tmp_path.glob("meta.json.corrupt-*"))) == 1
