"""The per-session event bus: ids, frames, replay, slow subscribers."""

from __future__ import annotations

import json
from typing import Any

from cairn.daemon.bus import EventBus, Subscription, sse_frame


def envelopes(frames: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for frame in frames:
        data = next(line for line in frame.decode().split("\n") if line.startswith("data: "))
        out.append(json.loads(data[len("data: ") :]))
    return out


def kinds(frames: list[bytes]) -> list[str]:
    return [e["type"] for e in envelopes(frames)]


def ids(frames: list[bytes]) -> list[int | None]:
    return [e.get("id") for e in envelopes(frames)]


def publish(bus: EventBus, n: int, kind: str = "session_update") -> None:
    for i in range(n):
        bus.publish(kind, {"n": i})


def test_events_get_monotonic_ids_from_one() -> None:
    bus = EventBus(ring_size=10, max_queued=10)
    publish(bus, 3)

    assert bus.last_id == 3
    assert ids(bus.subscribe(0).take()[:-1]) == [1, 2, 3]


def test_a_frame_repeats_id_and_type_and_carries_the_envelope() -> None:
    envelope = sse_frame(
        7, "turn_complete", {"stopReason": "end_turn"}, {"originatorClientId": "c"}
    )

    lines = envelope.frame.decode().split("\n")
    assert lines[0] == "id: 7"
    assert lines[1] == "event: turn_complete"
    body = json.loads(lines[2][len("data: ") :])
    assert body["id"] == 7 and body["v"] == 1 and body["type"] == "turn_complete"
    assert body["data"] == {"stopReason": "end_turn"}
    assert body["originatorClientId"] == "c"
    assert isinstance(body["_meta"]["serverTimestamp"], int)
    assert envelope.frame.endswith(b"\n\n") and lines[3:] == ["", ""]


def test_a_synthetic_frame_has_no_id_line() -> None:
    frame = sse_frame(None, "replay_complete", {"replayedCount": 0}).frame

    assert not frame.startswith(b"id:")
    assert "id" not in envelopes([frame])[0]


def test_a_frame_is_one_data_line_even_with_newlines_in_the_text() -> None:
    frame = sse_frame(1, "session_update", {"text": "a\nb\n\nc"}).frame

    assert frame.count(b"\n") == 4  # id, event, data, blank line


def test_a_cursor_replays_the_events_after_it_then_replay_complete() -> None:
    bus = EventBus(ring_size=10, max_queued=10)
    publish(bus, 5)

    frames = bus.subscribe(3).take()

    assert ids(frames) == [4, 5, None]
    assert envelopes(frames)[-1]["data"] == {"replayedCount": 2}


def test_no_cursor_means_live_events_only() -> None:
    bus = EventBus(ring_size=10, max_queued=10)
    publish(bus, 2)
    subscription = bus.subscribe(None)
    publish(bus, 1)

    assert ids(subscription.take()) == [3]


def test_a_cursor_older_than_the_ring_asks_for_a_resync_first() -> None:
    bus = EventBus(ring_size=3, max_queued=10)
    publish(bus, 6)

    frames = bus.subscribe(1).take()

    assert kinds(frames)[0] == "state_resync_required"
    assert envelopes(frames)[0]["data"] == {
        "reason": "ring_evicted",
        "lastDeliveredId": 1,
        "earliestAvailableId": 4,
    }
    assert ids(frames[1:]) == [4, 5, 6, None]


def test_a_cursor_from_the_future_is_an_epoch_reset_with_everything_replayed() -> None:
    bus = EventBus(ring_size=10, max_queued=10)
    publish(bus, 2)

    frames = bus.subscribe(50).take()

    assert envelopes(frames)[0]["data"]["reason"] == "epoch_reset"
    assert ids(frames[1:]) == [1, 2, None]


def test_a_slow_subscriber_is_warned_once_at_three_quarters_full() -> None:
    bus = EventBus(ring_size=100, max_queued=8)
    subscription = bus.subscribe(None)

    publish(bus, 7)

    frames = subscription.take()
    assert kinds(frames).count("slow_client_warning") == 1
    warning = envelopes(frames)[kinds(frames).index("slow_client_warning")]
    assert warning["data"] == {"queueSize": 6, "maxQueued": 8, "lastEventId": 0}
    assert kinds(frames).index("slow_client_warning") == 6  # right after the 6th event


def test_the_warning_re_arms_once_the_queue_is_drained() -> None:
    bus = EventBus(ring_size=100, max_queued=8)
    subscription = bus.subscribe(None)
    publish(bus, 6)
    subscription.take()

    publish(bus, 6)

    assert kinds(subscription.take()).count("slow_client_warning") == 1


def test_an_overflowing_subscriber_is_evicted_and_its_stream_ends() -> None:
    bus = EventBus(ring_size=100, max_queued=4)
    subscription = bus.subscribe(None)
    publish(bus, 2)
    subscription.take()

    publish(bus, 10)

    frames = subscription.take()
    assert kinds(frames) == ["slow_client_warning", "client_evicted"]  # queued events dropped
    assert envelopes(frames)[1]["data"] == {"reason": "queue_overflow", "droppedAfter": 2}
    assert subscription.evicted and subscription.drained
    assert bus.subscriber_count == 0


def test_an_evicted_subscriber_can_replay_what_it_missed() -> None:
    bus = EventBus(ring_size=100, max_queued=4)
    subscription = bus.subscribe(None)
    publish(bus, 10)
    assert subscription.evicted

    assert ids(bus.subscribe(0).take()) == [*range(1, 11), None]


def test_close_sends_a_last_event_and_ends_every_stream() -> None:
    bus = EventBus(ring_size=10, max_queued=10)
    subscription = bus.subscribe(None)

    bus.close("session_closed", {"reason": "client_close"})

    assert kinds(subscription.take()) == ["session_closed"]
    assert subscription.drained
    assert bus.publish("late", {}) is None


def test_subscribing_after_close_replays_then_ends() -> None:
    bus = EventBus(ring_size=10, max_queued=10)
    publish(bus, 1)
    bus.close("session_closed", {})

    subscription = bus.subscribe(0)

    assert kinds(subscription.take()) == ["session_update", "session_closed", "replay_complete"]
    assert subscription.drained


async def test_wait_returns_false_after_the_timeout_when_idle() -> None:
    subscription = EventBus(ring_size=10, max_queued=10).subscribe(None)

    assert await subscription.wait(0.01) is False


async def test_wait_wakes_when_an_event_arrives() -> None:
    bus = EventBus(ring_size=10, max_queued=10)
    subscription: Subscription = bus.subscribe(None)
    publish(bus, 1)

    assert await subscription.wait(5) is True
