"""Random identifiers (session, record and message ids) without the ``uuid`` module.

``import uuid`` loads ``platform`` and asks the system its name, about 9 M instructions of every
start-up; cairn needs only random version-4 UUIDs, which are 16 random bytes with six bits set.
"""

from __future__ import annotations

import os

__all__ = ["new_uuid", "random_hex"]


def new_uuid() -> str:
    """A random UUID in its usual form (``str(uuid.uuid4())``)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def random_hex(length: int) -> str:
    """``length`` random hex digits (``uuid.uuid4().hex[:length]``, or ``secrets.token_hex``)."""
    return os.urandom((length + 1) // 2).hex()[:length]
