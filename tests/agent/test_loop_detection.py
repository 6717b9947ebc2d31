from cairn.agent.loop_detection import (
    CONTENT_LOOP_THRESHOLD,
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
