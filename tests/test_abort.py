"""AbortController / AbortSignal: cancellation that carries its reason to every watcher; the
bounded wait for an event."""

from __future__ import annotations

import asyncio

import pytest

from cairn.abort import AbortController, Aborted, wait_until_set


def test_a_fresh_signal_is_not_aborted_and_has_no_reason() -> None:
    controller = AbortController()

    assert not controller.signal.aborted
    assert controller.signal.reason is None
    controller.signal.raise_if_aborted()  # does not raise


def test_listeners_fire_once_with_the_reason() -> None:
    controller = AbortController()
    heard: list[str | None] = []
    controller.signal.add_listener(heard.append)

    controller.abort("new_query")
    controller.abort("shutdown")  # a second abort changes nothing

    assert heard == ["new_query"]
    assert controller.signal.reason == "new_query"


def test_every_listener_fires_in_registration_order() -> None:
    controller = AbortController()
    heard: list[str] = []
    controller.signal.add_listener(lambda r: heard.append(f"first:{r}"))
    controller.signal.add_listener(lambda r: heard.append(f"second:{r}"))

    controller.abort("abort")

    assert heard == ["first:abort", "second:abort"]


def test_a_listener_added_after_the_abort_fires_at_once() -> None:
    controller = AbortController()
    controller.abort("timeout")
    heard: list[str | None] = []

    remove = controller.signal.add_listener(heard.append)

    assert heard == ["timeout"]
    remove()  # the remover of a late listener is harmless
    assert heard == ["timeout"]


def test_a_removed_listener_does_not_fire() -> None:
    controller = AbortController()
    kept: list[str | None] = []
    dropped: list[str | None] = []
    controller.signal.add_listener(kept.append)
    remove = controller.signal.add_listener(dropped.append)

    remove()
    remove()  # removing twice is harmless
    controller.abort("abort")

    assert kept == ["abort"]
    assert dropped == []


def test_raise_if_aborted_raises_aborted_with_the_reason() -> None:
    controller = AbortController()
    controller.abort("user_cancel")

    with pytest.raises(Aborted, match="user_cancel") as caught:
        controller.signal.raise_if_aborted()

    assert caught.value.reason == "user_cancel"


def test_an_abort_without_reason_says_aborted() -> None:
    controller = AbortController()
    controller.abort()

    with pytest.raises(Aborted, match=r"^aborted$") as caught:
        controller.signal.raise_if_aborted()

    assert caught.value.reason is None


def test_a_linked_child_aborts_with_its_own_reason_when_the_parent_does() -> None:
    parent = AbortController()
    child = AbortController.linked(parent.signal, reason="parent_aborted")

    parent.abort("user_cancel")

    assert child.signal.aborted
    assert child.signal.reason == "parent_aborted"
    assert parent.signal.reason == "user_cancel"


def test_aborting_a_linked_child_leaves_the_parent_running() -> None:
    parent = AbortController()
    child = AbortController.linked(parent.signal)

    child.abort("done")

    assert child.signal.reason == "done"
    assert not parent.signal.aborted


def test_a_child_linked_to_an_aborted_parent_starts_aborted() -> None:
    parent = AbortController()
    parent.abort("shutdown")

    child = AbortController.linked(parent.signal, reason="inherited")

    assert child.signal.aborted
    assert child.signal.reason == "inherited"


async def test_wait_returns_the_reason_once_aborted() -> None:
    controller = AbortController()
    waiter = asyncio.ensure_future(controller.signal.wait())
    await asyncio.sleep(0)
    assert not waiter.done()

    controller.abort("new_query")

    assert await asyncio.wait_for(waiter, timeout=5) == "new_query"


async def test_wait_on_an_aborted_signal_returns_at_once() -> None:
    controller = AbortController()
    controller.abort("timeout")

    assert await controller.signal.wait() == "timeout"


async def test_several_waiters_all_wake_with_the_reason() -> None:
    controller = AbortController()
    waiters = [asyncio.ensure_future(controller.signal.wait()) for _ in range(3)]
    await asyncio.sleep(0)

    controller.abort("shutdown")

    assert await asyncio.wait_for(asyncio.gather(*waiters), timeout=5) == ["shutdown"] * 3


async def test_wait_until_set_is_true_for_an_event_already_set() -> None:
    event = asyncio.Event()
    event.set()

    assert await wait_until_set(event, 0)


async def test_wait_until_set_is_false_when_the_timeout_passes_first() -> None:
    assert not await wait_until_set(asyncio.Event(), 0.01)


async def test_wait_until_set_is_true_when_the_event_is_set_while_waiting() -> None:
    event = asyncio.Event()
    asyncio.get_running_loop().call_soon(event.set)

    assert await wait_until_set(event, None)
