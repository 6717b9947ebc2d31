from cairn.content import (
    Content,
    FunctionCall,
    FunctionResponse,
    Image,
    Text,
    Thought,
    clip_text,
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
    assert part_from_dict({"inlineData": {"mimeType": "audio/wav", "data": "AA=="}}) is None
    assert part_from_dict({"fileData": {"fileUri": "gs://x"}}) is None
    assert part_from_dict("not a part") is None


def test_an_image_round_trips_as_gemini_inline_data():
    image = Image("image/png", "iVBORw0KGgo=", "shot.png")
    data = Content("user", [Text("look"), image]).to_dict()

    assert data["parts"][1] == {
        "inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo=", "displayName": "shot.png"}
    }
    assert Content.from_dict(data).parts == [Text("look"), image]


def test_a_tool_result_keeps_its_images():
    response = FunctionResponse(
        "c1", "read_file", {"output": "an image"}, (Image("image/gif", "R0lGOA=="),)
    )
    data = Content("user", [response]).to_dict()

    assert data["parts"][0]["functionResponse"]["parts"] == [
        {"inlineData": {"mimeType": "image/gif", "data": "R0lGOA=="}}
    ]
    assert Content.from_dict(data).parts == [response]


def test_a_thought_keeps_its_signature_and_redaction():
    signed = Thought("step one", signature="sig-1")
    redacted = Thought("", signature="opaque", redacted=True)
    data = Content("model", [signed, redacted]).to_dict()

    assert data["parts"][0] == {"text": "step one", "thought": True, "thoughtSignature": "sig-1"}
    assert Content.from_dict(data).parts == [signed, redacted]


def test_image_size_is_the_decoded_byte_count():
    assert Image("image/png", "QUJD").size == 3
    assert Image("image/png", "QUI=").size == 2
    assert Image("image/png", "").size == 0


def test_malformed_nested_part_fields_are_read_as_empty_not_fatal():
    """Regression: a recorded functionCall whose args is a list raised out of from_dict."""
    assert part_from_dict({"functionCall": {"name": "x", "args": [1, 2]}}) == FunctionCall(
        "", "x", {}
    )
    assert part_from_dict({"functionResponse": "oops"}) == FunctionResponse("", "", {"output": ""})


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


def test_clip_text_keeps_text_that_fits_and_says_how_much_it_cut():
    assert clip_text("short", 5, " [{dropped} cut]") == "short"
    assert clip_text("a longer text", 8, " [{dropped} cut]") == "a longer [5 cut]"
