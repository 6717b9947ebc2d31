"""The away-recap state machine, driven by a fake clock (no UI, no model)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.recap.away import (
    DEFAULT_AWAY_THRESHOLD_MINUTES,
    MIN_AWAY_THRESHOLD_MINUTES,
    AwayRecapTracker,
    away_threshold_seconds,
)

MINUTE = 60.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += minutes * MINUTE


class Settings:
    """Stands in for the live settings object: the tracker reads it on every decision."""

    def __init__(self, enabled: bool = True, minutes: float | None = 5) -> None:
        self.enabled = enabled
        self.minutes = minutes


def make(turns: int = 3, **settings: object) -> tuple[AwayRecapTracker, FakeClock, Settings]:
    clock = FakeClock()
    config = Settings(**settings)  # type: ignore[arg-type]
    tracker = AwayRecapTracker(
        clock=clock, enabled=lambda: config.enabled, threshold_minutes=lambda: config.minutes
    )
    for _ in range(turns):
        tracker.turn_started()
        tracker.user_turn()
        tracker.turn_ended()
    return tracker, clock, config


def away(tracker: AwayRecapTracker, clock: FakeClock, minutes: float):
    tracker.blur()
    clock.advance(minutes)
    return tracker.focus()


# ----- threshold -----


def test_threshold_defaults_to_five_minutes_for_non_positive_values():
    for value in (0, -3, None, math.nan):
        assert away_threshold_seconds(value) == DEFAULT_AWAY_THRESHOLD_MINUTES * MINUTE


def test_threshold_below_one_minute_is_raised_to_one_minute():
    assert away_threshold_seconds(0.2) == MIN_AWAY_THRESHOLD_MINUTES * MINUTE


def test_threshold_uses_the_configured_minutes():
    assert away_threshold_seconds(12.5) == 12.5 * MINUTE


@given(st.floats(allow_nan=True, allow_infinity=True) | st.none())
def test_threshold_is_always_at_least_one_minute(value):
    assert away_threshold_seconds(value) >= MIN_AWAY_THRESHOLD_MINUTES * MINUTE


# ----- firing -----


def test_fires_when_focus_returns_after_the_threshold():
    tracker, clock, _ = make()

    ticket = away(tracker, clock, 5)

    assert ticket is not None
    assert tracker.pending


def test_does_not_fire_before_the_threshold():
    tracker, clock, _ = make()

    assert away(tracker, clock, 4.9) is None
    assert tracker.away_since is None  # a short blur is forgotten


def test_does_not_fire_while_still_unfocused():
    tracker, clock, _ = make()
    tracker.blur()
    clock.advance(30)

    assert tracker.turn_ended() is None
    assert tracker.away_since is not None


def test_only_the_first_blur_starts_the_away_time():
    tracker, clock, _ = make()
    tracker.blur()
    clock.advance(3)
    tracker.blur()  # a second blur report while still away
    clock.advance(2)

    assert tracker.focus() is not None


def test_disabled_never_fires_and_forgets_the_blur():
    tracker, clock, config = make(enabled=False)

    assert away(tracker, clock, 60) is None
    config.enabled = True
    assert tracker.focus() is None


def test_enabling_while_running_applies_to_the_next_blur():
    tracker, clock, config = make(enabled=False)
    away(tracker, clock, 60)
    config.enabled = True

    assert away(tracker, clock, 5) is not None


def test_threshold_change_applies_at_once():
    tracker, clock, config = make(minutes=30)
    config.minutes = 1

    assert away(tracker, clock, 1) is not None


def test_busy_session_waits_and_fires_when_the_turn_ends():
    tracker, clock, _ = make()
    tracker.turn_started()

    assert away(tracker, clock, 10) is None
    assert tracker.away_since is not None  # kept until the session is idle

    assert tracker.turn_ended() is not None


def test_fires_once_per_absence():
    tracker, clock, _ = make()
    ticket = away(tracker, clock, 5)
    assert ticket is not None

    assert tracker.focus() is None
    assert tracker.turn_ended() is None


def test_no_second_recap_while_one_is_being_generated():
    tracker, clock, _ = make(turns=6)
    away(tracker, clock, 5)

    assert away(tracker, clock, 5) is None


# ----- gates -----


def test_fewer_than_three_user_turns_do_not_fire():
    tracker, clock, _ = make(turns=2)

    assert away(tracker, clock, 10) is None
    assert tracker.away_since is None


def test_steering_messages_do_not_count_as_user_turns():
    tracker, clock, _ = make(turns=2)
    tracker.turn_started()  # a turn whose extra messages were steering: only user_turn counts
    tracker.turn_ended()

    assert away(tracker, clock, 10) is None


def test_two_new_user_turns_are_needed_after_a_recap():
    tracker, clock, _ = make(turns=3)
    ticket = away(tracker, clock, 5)
    assert ticket is not None and tracker.finish(ticket, "Fixing the parser. Next: tests.")

    tracker.user_turn()
    assert away(tracker, clock, 5) is None

    tracker.user_turn()
    tracker.user_turn()
    assert away(tracker, clock, 5) is not None


def test_a_manual_recap_counts_as_the_last_recap():
    tracker, clock, _ = make(turns=4)
    tracker.recap_shown()
    tracker.user_turn()

    assert away(tracker, clock, 5) is None


def test_reset_restores_counts_from_a_resumed_history():
    tracker, clock, _ = make(turns=0)
    tracker.reset(user_turns=5, turns_since_recap=1)
    assert away(tracker, clock, 5) is None

    tracker.reset(user_turns=5, turns_since_recap=2)
    assert away(tracker, clock, 5) is not None


def test_clear_starts_the_count_again():
    tracker, clock, _ = make(turns=5)
    tracker.reset()

    assert away(tracker, clock, 5) is None


# ----- results -----


def test_result_is_shown_when_nothing_happened_meanwhile():
    tracker, clock, _ = make()
    ticket = away(tracker, clock, 5)
    assert ticket is not None

    assert tracker.finish(ticket, "Refactoring the loader. Next: run the tests.")
    assert not tracker.pending


def test_result_arriving_after_a_new_turn_started_is_dropped():
    tracker, clock, _ = make()
    ticket = away(tracker, clock, 5)
    assert ticket is not None
    tracker.turn_started()
    tracker.user_turn()

    assert not tracker.finish(ticket, "late")
    assert not tracker.pending


def test_result_is_dropped_even_if_the_new_turn_already_ended():
    tracker, clock, _ = make()
    ticket = away(tracker, clock, 5)
    assert ticket is not None
    tracker.turn_started()
    tracker.turn_ended()

    assert not tracker.finish(ticket, "late")


@pytest.mark.parametrize("text", [None, "", "   "])
def test_empty_result_is_not_shown_and_does_not_count(text):
    tracker, clock, _ = make()
    ticket = away(tracker, clock, 5)
    assert ticket is not None

    assert not tracker.finish(ticket, text)
    assert tracker.gates_pass()  # no recap was shown: the next absence may fire


def test_result_is_dropped_when_the_feature_was_turned_off_meanwhile():
    tracker, clock, config = make()
    ticket = away(tracker, clock, 5)
    assert ticket is not None
    config.enabled = False

    assert not tracker.finish(ticket, "a recap")
