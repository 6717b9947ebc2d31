"""Up/Down history of the prompt box."""

from __future__ import annotations

from cairn.ui.input_history import MAX_INPUT_HISTORY, InputHistory


def test_up_walks_back_from_the_newest_entry():
    history = InputHistory(["first", "second"])

    assert history.previous("") == "second"
    assert history.previous("") == "first"
    assert history.previous("") is None  # nothing older


def test_down_walks_forward_and_ends_with_the_unsent_draft():
    history = InputHistory(["first", "second"])
    history.previous("half typed")
    history.previous("half typed")

    assert history.next() == "second"
    assert history.next() == "half typed"
    assert not history.browsing


def test_down_without_browsing_does_nothing():
    assert InputHistory(["a"]).next() is None


def test_blank_and_repeated_prompts_are_kept_once():
    history = InputHistory()
    for text in ("ls", "ls", "  ", "pwd", "ls"):
        history.add(text)

    assert history.entries == ["ls", "pwd", "ls"]


def test_adding_stops_browsing():
    history = InputHistory(["a", "b"])
    history.previous("")
    history.add("c")

    assert history.previous("") == "c"


def test_history_is_bounded():
    history = InputHistory(str(i) for i in range(MAX_INPUT_HISTORY + 10))

    assert len(history.entries) == MAX_INPUT_HISTORY
    assert history.entries[-1] == str(MAX_INPUT_HISTORY + 9)
