"""The dialog a recap is written from: startup context, filtering and the recent window."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cairn.agent.prompt import STARTUP_CONTEXT_ACK, startup_context
from cairn.agent.reminders import system_reminder
from cairn.content import Content, FunctionCall, FunctionResponse, Part, Text, Thought
from cairn.recap.dialog import (
    RECENT_MESSAGE_WINDOW,
    filter_to_dialog,
    recent_dialog,
    startup_context_length,
    take_recent_dialog,
)

OPEN, CLOSE = "<system-reminder>", "</system-reminder>"


def user(*parts: Part) -> Content:
    return Content("user", list(parts))


def model(*parts: Part) -> Content:
    return Content("model", list(parts))


def texts(dialog: list[Content]) -> list[tuple[str, list[str]]]:
    return [(c.role, [p.text for p in c.parts if isinstance(p, Text)]) for c in dialog]


# ----- startup_context_length -----


def test_cairns_own_startup_context_is_two_entries(tmp_path: Path) -> None:
    history = [*startup_context(tmp_path), Content.user("fix the bug")]

    assert startup_context_length(history) == 2


def test_a_pure_reminder_first_entry_is_one_entry() -> None:
    history = [user(system_reminder("env"), system_reminder("skills")), Content.model("hi")]

    assert startup_context_length(history) == 1


def test_a_legacy_startup_pair_counts_whatever_the_first_entry_holds() -> None:
    history = [Content.user("plain context text"), Content.model(STARTUP_CONTEXT_ACK)]

    assert startup_context_length(history) == 2


def test_a_first_entry_mixing_a_reminder_and_a_prompt_is_not_startup_context() -> None:
    history = [user(system_reminder("env"), Text("fix the bug")), Content.model("ok")]

    assert startup_context_length(history) == 0


def test_a_history_starting_with_the_model_has_no_startup_context() -> None:
    assert startup_context_length([Content.model("hello"), Content.user("hi")]) == 0


def test_an_empty_history_has_no_startup_context() -> None:
    assert startup_context_length([]) == 0


# ----- filter_to_dialog -----


def test_tool_calls_and_results_are_dropped() -> None:
    history = [
        Content.user("read the readme"),
        model(Text("Reading it."), FunctionCall("c1", "read_file", {"path": "README.md"})),
        user(FunctionResponse("c1", "read_file", {"output": "SECRET FILE BODY"})),
        Content.model("It explains the install."),
    ]

    assert texts(filter_to_dialog(history)) == [
        ("user", ["read the readme"]),
        ("model", ["Reading it."]),
        ("model", ["It explains the install."]),
    ]


def test_thoughts_are_dropped() -> None:
    history = [Content.user("hi"), model(Thought("hidden reasoning"), Text("Hello."))]

    assert texts(filter_to_dialog(history)) == [("user", ["hi"]), ("model", ["Hello."])]


def test_reminder_blocks_are_stripped_from_text() -> None:
    history = [user(Text(f"before{OPEN}\nrecalled memory\n{CLOSE}after"))]

    assert texts(filter_to_dialog(history)) == [("user", ["beforeafter"])]


def test_an_unclosed_reminder_drops_everything_after_its_opening_tag() -> None:
    history = [user(Text(f"keep this {OPEN}secret to the end"))]

    assert texts(filter_to_dialog(history)) == [("user", ["keep this "])]


def test_a_part_that_is_only_a_reminder_is_dropped_with_its_entry() -> None:
    history = [user(system_reminder("plan mode is on")), Content.model("ok")]

    assert texts(filter_to_dialog(history)) == [("model", ["ok"])]


def test_blank_parts_and_emptied_entries_are_dropped() -> None:
    history = [user(Text("   "), Text("\n")), model(Text("real")), user(Text(""))]

    assert texts(filter_to_dialog(history)) == [("model", ["real"])]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "model"]),
            st.lists(
                st.one_of(
                    st.builds(Text, st.text()),
                    st.builds(Thought, st.text()),
                    st.builds(FunctionCall, st.text(max_size=5), st.text(max_size=5)),
                ),
                max_size=4,
            ),
        ),
        max_size=8,
    )
)
def test_filtering_any_history_keeps_only_non_blank_text(
    entries: list[tuple[str, list[Part]]],
) -> None:
    history = [Content(role, parts) for role, parts in entries]  # type: ignore[arg-type]

    dialog = filter_to_dialog(history)

    for entry in dialog:
        assert entry.parts
        assert all(isinstance(p, Text) and p.text.strip() for p in entry.parts)


@given(st.text().filter(lambda t: OPEN not in t and t.strip()))
def test_text_without_reminders_passes_through_unchanged(text: str) -> None:
    assert texts(filter_to_dialog([Content.user(text)])) == [("user", [text])]


# ----- take_recent_dialog -----


def alternating(n: int, *, first: str = "user") -> list[Content]:
    roles = ["user", "model"] if first == "user" else ["model", "user"]
    return [Content(roles[i % 2], [Text(f"m{i}")]) for i in range(n)]  # type: ignore[arg-type]


def test_a_short_dialog_is_kept_whole() -> None:
    dialog = alternating(RECENT_MESSAGE_WINDOW)

    assert take_recent_dialog(dialog) == dialog


def test_a_long_dialog_keeps_the_last_window_when_it_starts_on_a_user_message() -> None:
    dialog = alternating(40)  # index 10 (the window's start) is a user message

    recent = take_recent_dialog(dialog)

    assert len(recent) == RECENT_MESSAGE_WINDOW
    assert recent[0] is dialog[10]


def test_the_window_never_starts_on_a_dangling_model_reply() -> None:
    dialog = alternating(41)  # the window would start at index 11, a model message

    recent = take_recent_dialog(dialog)

    assert recent[0].role == "user"
    assert recent[0] is dialog[12]
    assert len(recent) == RECENT_MESSAGE_WINDOW - 1


def test_a_tail_without_user_messages_is_empty() -> None:
    dialog = [*alternating(2), *[Content.model(f"r{i}") for i in range(35)]]

    assert take_recent_dialog(dialog) == []


def test_the_window_size_can_be_chosen() -> None:
    dialog = alternating(10)

    assert take_recent_dialog(dialog, window=4) == dialog[6:]


# ----- recent_dialog: the same result, reading only the tail -----

_ENTRIES = st.lists(
    st.tuples(
        st.sampled_from(["user", "model"]),
        st.lists(
            st.one_of(
                st.builds(Text, st.sampled_from(["hi", " ", "", f"{OPEN}x{CLOSE}", f"a{OPEN}b"])),
                st.builds(Thought, st.just("t")),
                st.builds(FunctionResponse, st.just("c"), st.just("f"), st.just({"output": "o"})),
            ),
            max_size=3,
        ),
    ),
    max_size=60,
)


@given(_ENTRIES, st.integers(min_value=1, max_value=12))
def test_recent_dialog_equals_filtering_everything_then_taking_the_window(
    entries: list[tuple[str, list[Part]]], window: int
) -> None:
    history = [Content(role, parts) for role, parts in entries]  # type: ignore[arg-type]

    expected = take_recent_dialog(filter_to_dialog(history), window)

    assert texts(recent_dialog(history, window)) == texts(expected)


def test_recent_dialog_reads_only_as_far_back_as_it_needs() -> None:
    class Exploding(Content):
        @property  # type: ignore[override]
        def parts(self) -> list[Part]:
            raise AssertionError("read an entry outside the window")

        @parts.setter
        def parts(self, value: list[Part]) -> None:
            pass

    history = [Exploding("user", []), *alternating(RECENT_MESSAGE_WINDOW + 2)]

    assert len(recent_dialog(history)) == RECENT_MESSAGE_WINDOW
