"""When to show the away recap: a small state machine fed by a front end, with an injected clock.

The terminal UI feeds it focus and blur (terminal focus reporting), idle and busy (turns starting
and ending) and the user turns it sends; the tracker answers with a :class:`RecapTicket` when a
recap should be generated now, and decides with :meth:`AwayRecapTracker.finish` whether the
result may still be shown. It knows nothing about Textual, sessions or models (reference A.7).

The order of the checks when focus returns or the session becomes idle:

1. the feature is off → forget the blur;
2. still unfocused, or never blurred → nothing;
3. the blur was shorter than the threshold → forget it;
4. a recap is already being generated → nothing (dedupe);
5. a turn is running → wait (the blur is kept; becoming idle re-checks);
6. the user-turn gates fail → forget the blur;
7. otherwise fire once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_AWAY_THRESHOLD_MINUTES",
    "MIN_AWAY_THRESHOLD_MINUTES",
    "MIN_USER_TURNS_SINCE_LAST_RECAP",
    "MIN_USER_TURNS_TO_FIRE",
    "AwayRecapTracker",
    "RecapTicket",
    "away_threshold_seconds",
]

DEFAULT_AWAY_THRESHOLD_MINUTES = 5.0  # minutes unfocused before the recap fires, by default
MIN_AWAY_THRESHOLD_MINUTES = 1.0  # the shortest threshold the setting allows
MIN_USER_TURNS_TO_FIRE = 3  # real user turns in the conversation before any away recap
MIN_USER_TURNS_SINCE_LAST_RECAP = 2  # new user turns needed after the previous recap
_SECONDS_PER_MINUTE = 60.0


def away_threshold_seconds(minutes: float | None) -> float:
    """The blur time that triggers a recap: a non-positive (or missing) value means the default."""
    if minutes is None or not math.isfinite(minutes) or minutes <= 0:
        minutes = DEFAULT_AWAY_THRESHOLD_MINUTES
    return max(minutes, MIN_AWAY_THRESHOLD_MINUTES) * _SECONDS_PER_MINUTE


@dataclass(frozen=True)
class RecapTicket:
    """One fired recap; its result is shown only if no turn started since it was issued."""

    epoch: int


@dataclass(kw_only=True, eq=False)
class AwayRecapTracker:
    """Decides when an away recap fires and whether its result may be shown.

    ``enabled`` and ``threshold_minutes`` are read on every decision, so a setting changed while
    the program runs (``/settings``) applies at once.
    """

    clock: Callable[[], float]
    enabled: Callable[[], bool]
    threshold_minutes: Callable[[], float | None]
    focused: bool = field(default=True, init=False)
    idle: bool = field(default=True, init=False)
    user_turns: int = field(default=0, init=False)
    _turns_at_last_recap: int | None = field(default=None, init=False)
    _blurred_at: float | None = field(default=None, init=False)
    _pending: RecapTicket | None = field(default=None, init=False)
    _epoch: int = field(default=0, init=False)

    # ----- what the front end reports -----

    def blur(self) -> None:
        self.focused = False
        if self.enabled() and self._blurred_at is None:
            self._blurred_at = self.clock()

    def focus(self) -> RecapTicket | None:
        self.focused = True
        return self._evaluate()

    def turn_started(self) -> None:
        """A turn began: a recap still being generated must not be shown any more."""
        self.idle = False
        self._epoch += 1

    def turn_ended(self) -> RecapTicket | None:
        self.idle = True
        return self._evaluate()

    def user_turn(self) -> None:
        """A real user prompt went to the model (not a steering message or a local command)."""
        self.user_turns += 1

    def recap_shown(self) -> None:
        """A recap (away or ``/recap``) is now in the conversation."""
        self._turns_at_last_recap = self.user_turns

    def reset(self, *, user_turns: int = 0, turns_since_recap: int | None = None) -> None:
        """A new conversation (``/clear``) or a resumed one, with what its history holds."""
        self.user_turns = user_turns
        self._turns_at_last_recap = (
            None if turns_since_recap is None else user_turns - turns_since_recap
        )
        self._blurred_at = None
        self._epoch += 1

    # ----- gates and results -----

    @property
    def pending(self) -> bool:
        return self._pending is not None

    @property
    def away_since(self) -> float | None:
        return self._blurred_at

    def gates_pass(self) -> bool:
        if self.user_turns < MIN_USER_TURNS_TO_FIRE:
            return False
        if self._turns_at_last_recap is None:
            return True
        return self.user_turns - self._turns_at_last_recap >= MIN_USER_TURNS_SINCE_LAST_RECAP

    def finish(self, ticket: RecapTicket, text: str | None) -> bool:
        """The recap of ``ticket`` arrived: ``True`` if it is to be shown (and counts as shown)."""
        if self._pending == ticket:
            self._pending = None
        show = (
            text is not None
            and bool(text.strip())
            and ticket.epoch == self._epoch
            and self.idle
            and self.enabled()
        )
        if show:
            self.recap_shown()
        return show

    def _evaluate(self) -> RecapTicket | None:
        if not self.enabled():
            self._blurred_at = None
            return None
        if not self.focused or self._blurred_at is None:
            return None
        away = self.clock() - self._blurred_at
        if away < away_threshold_seconds(self.threshold_minutes()):
            self._blurred_at = None
            return None
        if self._pending is not None or not self.idle:
            return None
        if not self.gates_pass():
            self._blurred_at = None
            return None
        self._blurred_at = None
        self._pending = RecapTicket(self._epoch)
        return self._pending
