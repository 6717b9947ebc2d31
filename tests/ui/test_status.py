"""The status line's text."""

from __future__ import annotations

import pytest

from cairn.ui.status import StatusState, format_elapsed, format_tokens, render_status


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


def test_tokens_read_from_the_endpoints_cache_are_shown_with_the_context():
    state = StatusState(
        model="m", context_tokens=20_000, context_window=100_000, cached_tokens=18_500
    )

    assert "context 20% (20.0k/100k, 18.5k cached)" in render_status(state).plain


def test_busy_leads_with_a_spinner_and_the_elapsed_time_then_a_hint():
    state = StatusState(model="m", busy=True, elapsed=12.34, hint="Press Ctrl+C again")

    plain = render_status(state).plain
    assert plain.startswith("⠸ working… 12s · esc to interrupt  ·  Press Ctrl+C again  ·  m  ·  ")
    assert plain.endswith("memory on")


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0s"), (7.9, "7s"), (65, "1m 05s"), (3725, "1h 02m")]
)
def test_elapsed_time_is_short(seconds, shown):
    assert format_elapsed(seconds) == shown


async def test_an_update_that_changes_nothing_draws_nothing_again():
    """A tick of a stopped clock (the tests' clock) or a repeated update (the model, mode and
    memory after every turn) leaves the line as drawn: no repaint."""
    from textual.app import App

    from cairn.ui.status import StatusLine

    now = [100.0]
    status = StatusLine(clock=lambda: now[0])

    class Host(App[None]):
        def compose(self):
            yield status

    async with Host().run_test(size=(80, 3)) as pilot:
        status.set(model="m1", approval_mode="plan")
        drawn = status.content
        assert "m1" in str(drawn)

        status.set(model="m1", approval_mode="plan")
        assert status.content is drawn

        status.set(busy=True)
        busy = status.content
        status.tick()  # the clock has not moved
        assert status.content is busy
        now[0] += 1.5
        status.tick()
        assert "working… 1s" in str(status.content)

        status.set(busy=False)
        await pilot.pause()
        assert str(status.content) == str(drawn)
