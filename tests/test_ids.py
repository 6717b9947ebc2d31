"""``cairn.ids``: random version-4 UUIDs and hex ids without the ``uuid`` module."""

from __future__ import annotations

import re
import uuid

from cairn.ids import new_uuid, random_hex


def test_a_new_uuid_reads_as_a_random_version_4_uuid() -> None:
    ids = [new_uuid() for _ in range(200)]

    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text  # the usual lower-case, hyphenated form
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    assert len(set(ids)) == len(ids)


def test_random_hex_has_the_length_asked_for_odd_ones_too() -> None:
    for length in (1, 11, 12, 24, 32):
        text = random_hex(length)
        assert re.fullmatch(f"[0-9a-f]{{{length}}}", text)
    assert len({random_hex(12) for _ in range(200)}) == 200
