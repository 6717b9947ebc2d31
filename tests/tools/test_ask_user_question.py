from __future__ import annotations

from typing import Any

import pytest

from cairn.testing import ScriptedFrontend
from cairn.tools.ask_user_question import NO_USER_MESSAGE, AskUserQuestionTool
from cairn.tools.base import Question, ToolContext

tool = AskUserQuestionTool()

DB_QUESTION = {
    "question": "Which database?",
    "header": "DB",
    "options": [
        {"label": "Postgres", "description": "Relational"},
        {"label": "SQLite"},
    ],
}


def scripted_user(answers: list[str] | None, *, interactive: bool = True) -> ScriptedFrontend:
    """A person who gives these answers (``None``: no answer), recording what was asked."""
    return ScriptedFrontend(answers=[answers], default_answer=None, interactive=interactive)


def asked(user: ScriptedFrontend) -> list[Question]:
    return [question for ask in user.questions for question in ask]


async def test_answers_come_back_as_question_and_answer_lines(ctx: ToolContext) -> None:
    ctx.interaction = scripted_user(["Postgres", "yes"])
    confirm = {"question": "Add migrations?", "options": ["yes", "no"], "multiSelect": False}

    result = await tool.execute({"questions": [DB_QUESTION, confirm]}, ctx)

    assert result.output == ("The user answered:\nWhich database?: Postgres\nAdd migrations?: yes")


async def test_questions_reach_the_front_end_with_labels_descriptions_and_header(
    ctx: ToolContext,
) -> None:
    user = scripted_user(["SQLite"])
    ctx.interaction = user

    await tool.execute({"questions": [{**DB_QUESTION, "multiSelect": True}]}, ctx)

    assert asked(user) == [
        Question("Which database?", ["Postgres", "SQLite"], "DB", True, ["Relational", ""])
    ]


async def test_without_an_interaction_the_model_is_told_to_assume(ctx: ToolContext) -> None:
    result = await tool.execute({"questions": [DB_QUESTION]}, ctx)

    assert result.error is None
    assert result.output == NO_USER_MESSAGE


async def test_a_non_interactive_front_end_is_not_asked(ctx: ToolContext) -> None:
    user = scripted_user(["Postgres"], interactive=False)
    ctx.interaction = user

    result = await tool.execute({"questions": [DB_QUESTION]}, ctx)

    assert result.output == NO_USER_MESSAGE
    assert asked(user) == []


async def test_no_answer_from_the_front_end_means_no_user(ctx: ToolContext) -> None:
    ctx.interaction = scripted_user(None)

    result = await tool.execute({"questions": [DB_QUESTION]}, ctx)

    assert result.output == NO_USER_MESSAGE


async def test_a_blank_answer_is_shown_as_no_answer(ctx: ToolContext) -> None:
    ctx.interaction = scripted_user([""])

    result = await tool.execute({"questions": [DB_QUESTION]}, ctx)

    assert result.output == "The user answered:\nWhich database?: (no answer)"


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        ([], "1-4 questions"),
        ([DB_QUESTION] * 5, "1-4 questions"),
        ([{"options": ["a", "b"]}], "questions[0].question must be a non-empty string"),
        ([{"question": "Q?", "options": ["only"]}], "questions[0].options must list 2-4"),
        ([{"question": "Q?", "options": ["a", "b", "c", "d", "e"]}], "must list 2-4"),
        ([{"question": "Q?", "options": ["a", {"label": ""}]}], "options[1].label"),
        ([{"question": "Q?", "options": ["a", "b"], "multiSelect": "yes"}], "multiSelect"),
    ],
)
async def test_invalid_questions_are_refused_before_asking(
    ctx: ToolContext, questions: Any, message: str
) -> None:
    user = scripted_user(["a"])
    ctx.interaction = user

    result = await tool.execute({"questions": questions}, ctx)

    assert result.error is not None
    assert message in result.error
    assert asked(user) == []


def test_needs_no_confirmation(ctx: ToolContext) -> None:
    assert tool.confirmation({"questions": [DB_QUESTION]}, ctx) is None
    assert tool.kind == "other"
