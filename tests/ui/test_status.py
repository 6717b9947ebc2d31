"""The status line's text."""

from __future__ import annotations

import pytest

from cairn.ui.status import StatusState, format_tokens, render_status


@pytest.mark.parametrize(
    ("count", "shown"), [(0, "0"), (999, "999"), (1234, "1.2k"), (131072, "131k")]
)
def test_token_counts_are_short(count, shown):
    assert format_tokens(count) == shown


def test_status_names_model_mode_context_and_memory():
    state = StatusState(
        model="m1", approval_mode="yolo", context_tokens=2048, context_window=8192, memory=False
    )

    assert render_status(state).plain == "m1  ·  yolo  ·  context 25% (2.0k/8.2k)  ·  memory off"


def test_busy_and_hint_are_appended():
    state = StatusState(model="m", busy=True, hint="Press Ctrl+C again to quit")

    assert render_status(state).plain.endswith("working…  ·  Press Ctrl+C again to quit")
