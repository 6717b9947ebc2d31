from cairn.content import (
    Content,
    FunctionCall,
    FunctionResponse,
    Text,
    Thought,
    insert_after_function_responses,
    part_from_dict,
)


def test_content_round_trips_through_the_recording_shape():
    content = Content(
        "model",
        [Thought("hmm"), Text("hi"), FunctionCall("c1", "read_file", {"file_path": "a.py"})],
    )
    data = content.to_dict()
    assert data["parts"][0] == {"text": "hmm", "thought": True}
    assert data["parts"][2] == {
        "functionCall": {"id": "c1", "name": "read_file", "args": {"file_path": "a.py"}}
    }
    assert Content.from_dict(data) == content


def test_function_response_exposes_output_or_error_text():
    ok = FunctionResponse("c1", "read_file", {"output": "data"})
    bad = FunctionResponse("c2", "edit", {"error": "not found"})
    assert (ok.text, ok.is_error) == ("data", False)
    assert (bad.text, bad.is_error) == ("not found", True)


def test_unknown_part_kinds_are_dropped_not_fatal():
    assert part_from_dict({"inlineData": {"mimeType": "image/png", "data": "AA=="}}) is None
    assert part_from_dict("not a part") is None


def test_content_with_an_unknown_role_is_rejected_with_a_clear_message():
    try:
        Content.from_dict({"role": "tool", "parts": []})
    except ValueError as exc:
        assert "role" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_additions_go_after_leading_function_responses_and_before_other_text():
    r1 = FunctionResponse("a", "t", {"output": "1"})
    r2 = FunctionResponse("b", "t", {"output": "2"})
    memory = Text("memory")
    steering = Text("user steering")
    parts = insert_after_function_responses([r1, r2, steering], [memory])
    assert parts == [r1, r2, memory, steering]


def test_additions_are_prepended_when_there_are_no_function_responses():
    user = Text("question")
    assert insert_after_function_responses([user], [Text("m")]) == [Text("m"), user]
