"""Fixtures of the provider tests of both wires."""

from __future__ import annotations

import pytest

from .helpers import RecordingSleep


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()
