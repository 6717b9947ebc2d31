"""``ask_user_question``: multiple-choice questions to the user, through the front end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cairn.tools.base import Question, ToolContext, ToolError, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool
from cairn.tools.schema import object_schema, string_property
from cairn.vocabulary.tool_names import ToolName

__all__ = ["NO_USER_MESSAGE", "AskUserQuestionTool", "parse_questions"]

MAX_QUESTIONS = 4  # questions in one call
MIN_OPTIONS = 2  # choices per question, at least
MAX_OPTIONS = 4  # choices per question, at most
NO_USER_MESSAGE = (
    "No user is available to answer questions in this mode. Make a reasonable assumption, "
    "state it, and continue."
)

_OPTION_SCHEMA = object_schema(
    {
        "label": string_property("The choice, in a few words."),
        "description": string_property("What choosing it means."),
    },
    required=["label"],
)
_QUESTION_SCHEMA = object_schema(
    {
        "question": string_property("The full question."),
        "header": string_property("A very short label."),
        "options": {
            "type": "array",
            "minItems": MIN_OPTIONS,
            "maxItems": MAX_OPTIONS,
            "items": _OPTION_SCHEMA,
        },
        "multiSelect": {"type": "boolean", "description": "Allow choosing more than one option."},
    },
    required=["question", "options"],
)
_PARAMETERS = object_schema(
    {
        "questions": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_QUESTIONS,
            "items": _QUESTION_SCHEMA,
        }
    },
    required=["questions"],
)


class AskUserQuestionTool(BuiltinTool):
    name = ToolName.ASK_USER_QUESTION
    description = (
        f"Ask the user 1-{MAX_QUESTIONS} multiple-choice questions ({MIN_OPTIONS}-{MAX_OPTIONS} "
        "options each) when a decision is theirs to make. The user may also answer in their "
        "own words. In non-interactive modes nobody answers: make an assumption and say so."
    )
    parameters = _PARAMETERS
    kind = ToolKind.OTHER

    def title(self, args: Mapping[str, Any]) -> str:
        questions = args.get("questions")
        if isinstance(questions, list) and questions and isinstance(questions[0], Mapping):
            return f"Ask: {questions[0].get('question', '')}"
        return "Ask the user"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        questions = parse_questions(args.get("questions"))
        interaction = ctx.interaction
        if interaction is None or not interaction.interactive:
            return ToolResult(output=NO_USER_MESSAGE)
        answers = await interaction.ask_user(questions)
        if answers is None:
            return ToolResult(output=NO_USER_MESSAGE)
        return ToolResult(output=_answers_text(questions, answers))


def parse_questions(value: Any) -> list[Question]:
    """Validate the ``questions`` argument; raises :class:`ToolError` naming the bad part."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_QUESTIONS:
        raise ToolError(
            f"Invalid parameters: `questions` must be a list of 1-{MAX_QUESTIONS} questions."
        )
    return [_parse_question(index, item) for index, item in enumerate(value)]


def _parse_question(index: int, item: Any) -> Question:
    where = f"questions[{index}]"
    if not isinstance(item, Mapping):
        raise ToolError(f"Invalid parameters: {where} must be an object.")
    text = item.get("question")
    if not isinstance(text, str) or not text.strip():
        raise ToolError(f"Invalid parameters: {where}.question must be a non-empty string.")
    header = item.get("header") or ""
    if not isinstance(header, str):
        raise ToolError(f"Invalid parameters: {where}.header must be a string.")
    multi = item.get("multiSelect", False)
    if not isinstance(multi, bool):
        raise ToolError(f"Invalid parameters: {where}.multiSelect must be true or false.")
    options = item.get("options")
    if not isinstance(options, list) or not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
        raise ToolError(
            f"Invalid parameters: {where}.options must list {MIN_OPTIONS}-{MAX_OPTIONS} choices."
        )
    labels = [_option_label(f"{where}.options[{i}]", o) for i, o in enumerate(options)]
    descriptions = [
        str(o.get("description") or "").strip() if isinstance(o, dict) else "" for o in options
    ]
    return Question(text.strip(), labels, header.strip(), multi, descriptions)


def _option_label(where: str, option: Any) -> str:
    label = option.get("label") if isinstance(option, Mapping) else option
    if not isinstance(label, str) or not label.strip():
        raise ToolError(f"Invalid parameters: {where}.label must be a non-empty string.")
    return label.strip()


def _answers_text(questions: Sequence[Question], answers: Sequence[str]) -> str:
    lines = ["The user answered:"]
    for index, question in enumerate(questions):
        answer = str(answers[index]).strip() if index < len(answers) else ""
        lines.append(f"{question.question}: {answer or '(no answer)'}")
    return "\n".join(lines)
