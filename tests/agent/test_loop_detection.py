from cairn.agent.loop_detection import (
    CONTENT_LOOP_THRESHOLD,
    CYCLE_REPEATS,
    FAILURE_LOOP_THRESHOLD,
    TOOL_CALL_LOOP_THRESHOLD,
    LoopDetector,
    describe_loop,
)
from cairn.content import FunctionCall


def test_five_identical_tool_calls_in_a_row_are_a_loop():
    detector = LoopDetector()
    call = FunctionCall("x", "read_file", {"file_path": "a.py"})
    results = [detector.check_tool_call(call) for _ in range(TOOL_CALL_LOOP_THRESHOLD)]
    assert results[:-1] == [None] * (TOOL_CALL_LOOP_THRESHOLD - 1)
    assert results[-1] is not None
    assert results[-1].loop_type == "consecutive_identical_tool_calls"


def test_a_different_call_in_between_resets_the_count():
    detector = LoopDetector()
    same = FunctionCall("x", "read_file", {"file_path": "a.py"})
    other = FunctionCall("y", "read_file", {"file_path": "b.py"})
    for _ in range(TOOL_CALL_LOOP_THRESHOLD - 1):
        assert detector.check_tool_call(same) is None
    assert detector.check_tool_call(other) is None
    assert detector.check_tool_call(same) is None


def test_the_same_sentence_chanted_over_and_over_is_a_loop():
    detector = LoopDetector()
    sentence = "I will now check the configuration file again. "  # 48 chars
    found = None
    for _ in range(CONTENT_LOOP_THRESHOLD * 3):
        found = found or detector.check_text(sentence)
    assert found is not None
    assert found.loop_type == "chanting_identical_sentences"


def test_varied_prose_is_not_a_loop():
    detector = LoopDetector()
    words = [f"Step {i} changes file number {i * 7} in a different way." for i in range(60)]
    assert all(detector.check_text(w + " ") is None for w in words)


def test_repetition_inside_a_code_block_is_ignored():
    detector = LoopDetector()
    assert detector.check_text("```\n") is None
    row = "| value | value | value | value | value | value |\n"
    assert all(detector.check_text(row) is None for _ in range(40))


def test_each_loop_the_detector_reports_has_words_for_people():
    detector = LoopDetector()
    call = FunctionCall("x", "read_file", {"file_path": "a.py"})
    calls = [detector.check_tool_call(call) for _ in range(TOOL_CALL_LOOP_THRESHOLD)]
    chanted = [detector.check_text("I will now check the configuration file again. ")
               for _ in range(CONTENT_LOOP_THRESHOLD * 3)]
    found = [info for info in (*calls, *chanted) if info is not None]

    words = {describe_loop(info.loop_type) for info in found}
    assert words == {
        "the model kept making the same tool call",
        "the model kept repeating the same text",
    }


def edit(old: str, new: str) -> FunctionCall:
    return FunctionCall("e", "edit", {"file_path": "a.py", "old_string": old, "new_string": new})


def test_two_calls_alternating_three_times_are_a_loop():
    """Issue 33: a model alternating two failing edits (A, B, A, B ..., three calls per answer)
    ran 13 requests and 35 failing calls until its context overflowed; only identical
    neighbours counted as a loop."""
    detector = LoopDetector()
    a, b = edit("x = 1", "x = 2"), edit("x = 2", "x = 1")
    sequence = [a, b] * CYCLE_REPEATS

    results = [detector.check_tool_call(call) for call in sequence]

    assert results[:-1] == [None] * (len(sequence) - 1)
    found = results[-1]
    assert found is not None
    assert found.loop_type == "repeated_tool_call_cycle"
    assert "2 tool calls" in found.detail and "edit" in found.detail
    assert describe_loop(found.loop_type) == "the model kept repeating the same tool calls"


def test_a_cycle_of_three_calls_coming_round_three_times_is_a_loop():
    detector = LoopDetector()
    read = FunctionCall("r", "read_file", {"file_path": "a.py"})
    run = FunctionCall("s", "run_shell_command", {"command": "pytest"})
    cycle = [read, edit("a", "b"), run]

    results = [detector.check_tool_call(call) for call in cycle * CYCLE_REPEATS]

    assert results[-1] is not None and results[-1].loop_type == "repeated_tool_call_cycle"
    assert all(r is None for r in results[:-1])


def test_a_cycle_that_came_round_only_twice_is_not_a_loop():
    detector = LoopDetector()
    a, b = edit("x = 1", "x = 2"), edit("x = 2", "x = 1")

    results = [detector.check_tool_call(c) for c in [a, b, a, b, edit("x = 3", "x = 4"), a, b]]

    assert results == [None] * 7


def test_varied_work_with_a_recurring_call_is_not_a_loop():
    detector = LoopDetector()
    test = FunctionCall("t", "run_shell_command", {"command": "pytest"})
    calls = []
    for i in range(10):
        calls += [edit(f"v{i}", f"v{i + 1}"), test]

    assert all(detector.check_tool_call(call) is None for call in calls)


def test_one_tool_failing_with_the_same_error_again_and_again_is_a_loop():
    detector = LoopDetector()
    error = "old_string was not found in a.py"

    results = [detector.check_tool_result("edit", error) for _ in range(FAILURE_LOOP_THRESHOLD)]

    assert results[:-1] == [None] * (FAILURE_LOOP_THRESHOLD - 1)
    found = results[-1]
    assert found is not None and found.loop_type == "repeated_tool_failure"
    assert "edit" in found.detail and "old_string was not found" in found.detail
    assert describe_loop(found.loop_type) == "a tool kept failing the same way"


def test_failures_with_different_errors_or_tools_and_successes_are_not_a_loop():
    detector = LoopDetector()
    results = []
    for i in range(FAILURE_LOOP_THRESHOLD * 2):
        results.append(detector.check_tool_result("edit", f"old_string {i} was not found"))
        results.append(detector.check_tool_result("read_file", None))
    results.append(detector.check_tool_result("grep_search", "old_string 0 was not found"))

    assert all(r is None for r in results)


def test_reset_forgets_cycles_and_failures():
    detector = LoopDetector()
    a, b = edit("x = 1", "x = 2"), edit("x = 2", "x = 1")
    for call in [a, b] * (CYCLE_REPEATS - 1) + [a]:
        detector.check_tool_call(call)
    for _ in range(FAILURE_LOOP_THRESHOLD - 1):
        detector.check_tool_result("edit", "boom")

    detector.reset()

    assert detector.check_tool_call(b) is None
    assert detector.check_tool_result("edit", "boom") is None
