"""Reading one hook's output and merging several outcomes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.hooks import HookOutcome, sanitize_context
from cairn.hooks.outcome import merge_outcomes, outcome_from_result
from cairn.hooks.process import CommandResult

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)
_hook_keys = st.sampled_from(
    ["continue", "stopReason", "reason", "decision", "systemMessage", "hookSpecificOutput"]
)
_hook_objects = st.dictionaries(
    _hook_keys,
    _json_values
    | st.dictionaries(
        st.sampled_from(
            ["hookEventName", "additionalContext", "permissionDecision", "permissionDecisionReason"]
        ),
        _json_values,
    ),
    max_size=6,
)


@given(
    stdout=st.text(),
    exit_code=st.integers(-20, 300),
    event=st.sampled_from(["UserPromptSubmit", "PreToolUse", "Stop"]),
)
def test_any_text_output_gives_an_outcome(stdout, exit_code, event):
    outcome = outcome_from_result(event, "h", CommandResult(exit_code=exit_code, stdout=stdout))

    assert isinstance(outcome, HookOutcome)


@given(data=_hook_objects, event=st.sampled_from(["UserPromptSubmit", "PreToolUse", "Stop"]))
def test_any_json_object_gives_a_consistent_outcome(data, event):
    stdout = json.dumps(data)

    outcome = outcome_from_result(event, "h", CommandResult(exit_code=0, stdout=stdout))

    if outcome.blocked:
        assert outcome.reason
    elif outcome.decision is None:
        assert outcome.reason is None
    if outcome.blocked and event == "PreToolUse":
        assert outcome.decision == "deny"
    if event != "PreToolUse":
        assert outcome.decision is None


def test_sanitize_escapes_angle_brackets_only():
    assert sanitize_context("<a> & b") == "&lt;a&gt; & b"


def test_merge_joins_block_reasons_without_repeats():
    outcomes = [
        HookOutcome(blocked=True, reason="tests fail"),
        HookOutcome(blocked=True, reason="lint fails"),
        HookOutcome(blocked=True, reason="tests fail"),
        HookOutcome(additional_context="context", reason="not blocking"),
    ]

    merged = merge_outcomes("Stop", outcomes)

    assert merged.blocked
    assert merged.reason == "tests fail\nlint fails"


def test_merge_of_nothing_is_an_empty_outcome():
    assert merge_outcomes("PreToolUse", []) == HookOutcome()


def test_truncated_output_is_a_warning():
    result = CommandResult(exit_code=0, stdout='{"decision": "bl', truncated=True)

    outcome = outcome_from_result("Stop", "'big'", result)

    assert not outcome.blocked
    assert outcome.warnings[0] == "hook 'big' (Stop) printed more than 1 MB; the rest was dropped"
    assert "not a JSON object" in outcome.warnings[1]


@pytest.mark.parametrize("event", ["UserPromptSubmit", "PreToolUse", "Stop"])
def test_deeply_nested_json_is_malformed_output_not_a_crash(event):
    """Regression (#18): a hook printing deeply nested JSON aborted the turn."""
    deep = "[" * 100_000 + "]" * 100_000
    for stdout in (deep, '{"systemMessage": ' + deep + "}"):
        outcome = outcome_from_result(event, "'deep'", CommandResult(exit_code=0, stdout=stdout))

        assert not outcome.blocked
        assert outcome.decision is None
        assert outcome.warnings


def test_the_notices_of_an_outcome_are_its_warnings_then_its_system_message():
    outcome = HookOutcome(warnings=["w1", "w2"], system_message="told")

    assert [(n.level, n.text, n.source) for n in outcome.notices()] == [
        ("warning", "w1", "hook"),
        ("warning", "w2", "hook"),
        ("info", "told", "hook"),
    ]
    assert HookOutcome().notices() == []
